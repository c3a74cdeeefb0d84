package tracing

import "github.com/tracecar/tracecar/internal/cql"

// responseRows returns the row count of a RESULT Rows response, or -1, as the view read it
// once for every reader (Frame.Response): when the body is not compressed, has been
// decompressed by another reader, or another reader read the response. A compressed
// response is not decompressed for this. It does not allocate, since full mode calls it on
// every traced response.
func responseRows(f *cql.Frame) int {
	if f.Header.Opcode != cql.OpResult || f.Compressed() && !f.Decompressed() && !f.ResponseRead() {
		return -1
	}
	return f.Response().Rows
}
