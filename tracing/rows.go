package tracing

import "github.com/tracecar/tracecar/internal/cql"

// responseRows returns the row count of a RESULT Rows response, or -1: from decompressed,
// the body readResponse decompressed, or from the frame itself when it is not compressed.
// A compressed response that readResponse did not decompress is not decompressed for this.
// It does not allocate, since full mode calls it on every traced response.
func responseRows(h cql.Header, frame, decompressed []byte) int {
	if h.Opcode != cql.OpResult {
		return -1
	}
	body := decompressed
	if body == nil {
		if h.Flags&cql.FlagCompression != 0 {
			return -1
		}
		body = frame[cql.HeaderSize:]
	}
	rest, err := cql.SkipResponsePrefix(h.Flags, body)
	if err != nil {
		return -1
	}
	if n, ok := cql.RowsCount(rest); ok {
		return n
	}
	return -1
}
