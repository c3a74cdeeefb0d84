package sidecar

import (
	"testing"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/tracing"
)

// pathConnV5 drives the per-frame work of a v5 connection past its handshake, as both
// paths run it per segment: one segment with an INSERT from the client, its RESULT Void
// in a segment from the node, each checked (both CRCs) and forwarded as it came.
type pathConnV5 struct {
	*pathConn
	reqs, resps [][]byte // by stream: the segments, built ahead (a stream id is under the CRC)
	arrived     int64
}

const v5Streams = 1024

func newPathConnV5(tb testing.TB, cfg tracing.Config, lz4 bool) *pathConnV5 {
	tb.Helper()
	pc := &pathConnV5{pathConn: newPathConn(tb, cfg)}
	c := pc.c
	c.version = cql.V5
	c.beginV5(lz4)
	c.segmentsAfter(cql.OpReady)
	body := cql.Query{Query: "INSERT INTO ks.t (k, v) VALUES (1, 2)", Params: cql.QueryParams{Consistency: cql.One}}.AppendBody(nil, cql.V5)
	for s := range v5Streams {
		req := frame(cql.V5, 0, int16(s), cql.OpQuery, body)
		resp := frame(cql.ResponseBit|cql.V5, 0, int16(s), cql.OpResult, voidBody())
		pc.reqs = append(pc.reqs, cql.AppendSegments(nil, req, lz4))
		pc.resps = append(pc.resps, cql.AppendSegments(nil, resp, lz4))
	}
	return pc
}

// one runs one request and its response on the next stream, and returns the size of the
// response segment to forward.
func (pc *pathConnV5) one(tb testing.TB) int {
	c := pc.c
	pc.stream = (pc.stream + 1) % v5Streams
	out, sent, err := c.requestSegment(pc.reqs[pc.stream], pc.sent[:0])
	if err != nil || len(out) != len(pc.reqs[pc.stream]) {
		tb.Fatalf("request segment: %d bytes, %v", len(out), err)
	}
	if len(sent) > 0 {
		c.wrote(sent, false)
	}
	pc.sent = sent
	pc.arrived = 0
	out, done, _, err := c.responseSegment(pc.resps[pc.stream], &pc.arrived, pc.done[:0])
	if err != nil {
		tb.Fatalf("response segment: %v", err)
	}
	if len(done) > 0 {
		c.wrote(done, true)
	}
	pc.done = done
	return len(out)
}

// TestRequestPathAllocsV5: the per-frame work of v5, segments checked and forwarded as
// they came, allocates nothing with tracing off or in fast mode below the threshold, as
// v4's (TestRequestPathAllocs).
func TestRequestPathAllocsV5(t *testing.T) {
	for _, lz4 := range []bool{false, true} {
		for _, tc := range []struct {
			name string
			cfg  tracing.Config
		}{
			{"off", tracing.DefaultConfig()},
			{"fast below threshold", tracing.Config{Enable: true, Fast: true, ThresholdMicros: 1e12}},
		} {
			name := tc.name
			if lz4 {
				name += "/lz4"
			}
			t.Run(name, func(t *testing.T) {
				pc := newPathConnV5(t, tc.cfg, lz4)
				one := func() {
					if n := pc.one(t); n != len(pc.resps[0]) {
						t.Fatalf("response of %d bytes; want %d", n, len(pc.resps[0]))
					}
				}
				for range 2 * v5Streams {
					one()
				}
				if n := testing.AllocsPerRun(1000, one); n != 0 {
					t.Errorf("%v allocations per request; want 0", n)
				}
				if st := pc.c.p.Stats(); st.Resegmented != 0 {
					t.Errorf("%d segments re-encoded; want none", st.Resegmented)
				}
			})
		}
	}
}

// BenchmarkRequestPathV5 is BenchmarkRequestPath at v5: the same per-frame work, plus the
// segment layer (both CRCs of a segment each way, lz4 decompression of each with lz4),
// segments forwarded as they came. The difference from BenchmarkRequestPath is what v5
// costs per request.
func BenchmarkRequestPathV5(b *testing.B) {
	for _, tc := range []struct {
		name string
		cfg  tracing.Config
	}{
		{"off", tracing.DefaultConfig()},
		{"fast", tracing.Config{Enable: true, Fast: true, ThresholdMicros: 1e12}},
		{"full", tracing.Config{Enable: true, ThresholdMicros: 1e12}},
	} {
		for _, lz4 := range []bool{false, true} {
			name := tc.name
			if lz4 {
				name += "/lz4"
			}
			b.Run(name, func(b *testing.B) {
				pc := newPathConnV5(b, tc.cfg, lz4)
				b.ReportAllocs()
				for b.Loop() {
					pc.one(b)
				}
			})
		}
	}
}
