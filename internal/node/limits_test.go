package node_test

import (
	"bufio"
	"bytes"
	"testing"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node"
)

// TestFrameSizeLimits: a frame over the limit, or over 64 KiB before the handshake is done,
// gets Cassandra's ProtocolError on its stream, and the connection closes.
func TestFrameSizeLimits(t *testing.T) {
	_, ap := mustServe(t, node.Config{MaxFrameSize: 1 << 20, Auth: "u:p"})
	startup := cql.AppendFrame(nil, cql.Header{Version: cql.V4, Stream: 1}, cql.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0"}})
	auth := cql.AppendFrame(nil, cql.Header{Version: cql.V4, Stream: 2}, cql.AuthResponse{Token: []byte("\x00u\x00p")})
	big := func(stream int16, n uint32) []byte {
		return cql.AppendHeader(nil, cql.Header{Version: cql.V4, Stream: stream, Opcode: cql.OpQuery, Length: n})
	}
	tests := []struct {
		name     string
		first    []byte // frames answered before the oversized one
		answers  int
		stream   int16
		length   uint32
		limit    int
		accepted bool
	}{
		{"before STARTUP", nil, 0, 5, 200 << 20, cql.MaxStartupFrameSize, false},
		{"before AUTH_SUCCESS", startup, 1, 6, 64 << 10, cql.MaxStartupFrameSize, false},
		{"after AUTH_SUCCESS over the limit", append(startup, auth...), 2, 7, 1 << 20, 1 << 20, false},
		{"after AUTH_SUCCESS under the limit", append(startup, auth...), 2, 8, 100 << 10, 1 << 20, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, ap)
			r := bufio.NewReader(c)
			c.Write(tt.first)
			for range tt.answers {
				if _, _, _, err := cql.ReadFrame(r, nil); err != nil {
					t.Fatal(err)
				}
			}
			f := big(tt.stream, tt.length)
			if tt.accepted {
				f = append(f, bytes.Repeat([]byte{0}, int(tt.length))...)
			}
			c.Write(f)
			h, body, _, err := cql.ReadFrame(r, nil)
			if err != nil {
				t.Fatalf("read answer: %v", err)
			}
			e, _ := cql.DecodeError(body)
			if tt.accepted {
				// A garbage body of the allowed size is read and refused as a query, not as a size.
				if e.Message == cql.FrameTooBigMessage(tt.length, tt.limit) {
					t.Fatalf("frame under the limit refused for its size")
				}
				return
			}
			if h.Opcode != cql.OpError || h.Stream != tt.stream || e.Code != cql.ErrCodeProtocol {
				t.Fatalf("got %s on stream %d %+v; want a ProtocolError on stream %d", h.Opcode, h.Stream, e, tt.stream)
			}
			if want := cql.FrameTooBigMessage(tt.length, tt.limit); e.Message != want {
				t.Fatalf("message %q, want %q", e.Message, want)
			}
			if _, _, _, err := cql.ReadFrame(r, nil); err == nil {
				t.Fatalf("connection still open after the ProtocolError")
			}
		})
	}
}

func TestScyllaSupported(t *testing.T) {
	for _, scylla := range []bool{false, true} {
		_, ap := mustServe(t, node.Config{ScyllaSupported: scylla})
		c := dial(t, ap)
		c.Write(cql.AppendFrame(nil, cql.Header{Version: cql.V4, Stream: 1}, cql.Options{}))
		_, body, _, err := cql.ReadFrame(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		m, err := cql.DecodeSupported(body)
		if err != nil {
			t.Fatal(err)
		}
		for k, want := range node.ScyllaSupportedOptions {
			got, ok := m.Options[k]
			if ok != scylla || ok && got[0] != want[0] {
				t.Errorf("ScyllaSupported %v: %s = %v (present %v)", scylla, k, got, ok)
			}
		}
	}
}
