package tracing

import "github.com/tracecar/tracecar/internal/cql"

// responseRows returns the row count of a RESULT Rows response, or -1: from the view's
// body when it is not compressed, or has been decompressed by another reader. A
// compressed response is not decompressed for this. It does not allocate, since full mode
// calls it on every traced response.
func responseRows(f *cql.Frame) int {
	if f.Header.Opcode != cql.OpResult || f.Compressed() && !f.Decompressed() {
		return -1
	}
	rest, err := f.Message()
	if err != nil {
		return -1
	}
	if n, ok := cql.RowsCount(rest); ok {
		return n
	}
	return -1
}
