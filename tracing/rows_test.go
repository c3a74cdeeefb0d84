package tracing

import (
	"testing"

	"github.com/tracecar/tracecar/internal/cql"
)

// TestResponseRows covers what responseRows adds to cql.RowsCount (tested against the full
// decoder in cql): the opcode, the prefix and compression.
func TestResponseRows(t *testing.T) {
	rows := rowsMsg()
	rows.Rows = append(rows.Rows, rows.Rows[0], rows.Rows[0])
	prefix := cql.ResponsePrefix{TracingID: nodeID, Warnings: []string{"w"}, CustomPayload: map[string][]byte{"k": {1}}}
	all := cql.FlagTracing | cql.FlagWarning | cql.FlagCustomPayload
	_, plain := mustResponse(t, respHeader(1, 0), cql.ResponsePrefix{}, rows, nil)
	ph, prefixed := mustResponse(t, respHeader(1, all), prefix, rows, nil)
	zh, z := mustResponse(t, respHeader(1, all), prefix, rows, cql.LZ4{})
	_, void := mustResponse(t, respHeader(1, 0), cql.ResponsePrefix{}, cql.VoidResult{}, nil)
	eh, errFrame := mustResponse(t, respHeader(1, 0), cql.ResponsePrefix{}, cql.Error{Code: cql.ErrCodeInvalid, Message: "x"}, nil)
	tests := []struct {
		name         string
		h            cql.Header
		frame        []byte
		decompressed bool // another reader decompressed the body first
		want         int
	}{
		{"plain", mustHeader(t, plain), plain, false, 3},
		{"prefixed", ph, prefixed, false, 3},
		{"compressed, decompressed", zh, z, true, 3},
		{"compressed, not decompressed", zh, z, false, -1},
		{"cut prefix", ph, prefixed[:cql.HeaderSize+20], false, -1},
		{"void", mustHeader(t, void), void, false, -1},
		{"error", eh, errFrame, false, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := view(tt.h, tt.frame, cql.LZ4{})
			if tt.decompressed {
				f.Body()
			}
			if got := responseRows(f); got != tt.want {
				t.Errorf("responseRows = %d; want %d", got, tt.want)
			}
			if n := testing.AllocsPerRun(100, func() { responseRows(f) }); n != 0 {
				t.Errorf("%v allocations; want 0", n)
			}
		})
	}
}
