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
	mustBody := func(f []byte) []byte {
		t.Helper()
		b, err := cql.LZ4{}.Decompress(nil, f[cql.HeaderSize:])
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	_, plain := mustResponse(t, respHeader(1, 0), cql.ResponsePrefix{}, rows, nil)
	ph, prefixed := mustResponse(t, respHeader(1, all), prefix, rows, nil)
	zh, z := mustResponse(t, respHeader(1, all), prefix, rows, cql.LZ4{})
	_, void := mustResponse(t, respHeader(1, 0), cql.ResponsePrefix{}, cql.VoidResult{}, nil)
	eh, errFrame := mustResponse(t, respHeader(1, 0), cql.ResponsePrefix{}, cql.Error{Code: cql.ErrCodeInvalid, Message: "x"}, nil)
	tests := []struct {
		name                string
		h                   cql.Header
		frame, decompressed []byte
		want                int
	}{
		{"plain", mustHeader(t, plain), plain, nil, 3},
		{"prefixed", ph, prefixed, nil, 3},
		{"compressed, decompressed", zh, z, mustBody(z), 3},
		{"compressed, not decompressed", zh, z, nil, -1},
		{"cut prefix", ph, prefixed[:cql.HeaderSize+20], nil, -1},
		{"void", mustHeader(t, void), void, nil, -1},
		{"error", eh, errFrame, nil, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := responseRows(tt.h, tt.frame, tt.decompressed); got != tt.want {
				t.Errorf("responseRows = %d; want %d", got, tt.want)
			}
			if n := testing.AllocsPerRun(100, func() { responseRows(tt.h, tt.frame, tt.decompressed) }); n != 0 {
				t.Errorf("%v allocations; want 0", n)
			}
		})
	}
}
