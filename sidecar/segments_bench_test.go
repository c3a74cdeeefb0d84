package sidecar

import (
	"testing"

	"github.com/tracecar/tracecar/sidecar/internal/pipeline"

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
	c.setVersion(cql.V5)
	segments{c}.beginV5(lz4)
	segments{c}.segmentsAfter(cql.OpReady)
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
	out, sent, err := segments{c}.requestSegment(pc.reqs[pc.stream], pc.sent[:0])
	if err != nil || len(out) != len(pc.reqs[pc.stream]) {
		tb.Fatalf("request segment: %d bytes, %v", len(out), err)
	}
	if len(sent) > 0 {
		c.pipe.Wrote(sent, false)
	}
	pc.sent = sent
	pc.arrived = 0
	out, done, _, err := segments{c}.responseSegment(pc.resps[pc.stream], &pc.arrived, pc.done[:0])
	if err != nil {
		tb.Fatalf("response segment: %v", err)
	}
	if len(done) > 0 {
		c.pipe.Wrote(done, true)
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
				var sum pipeline.Counts
				pc.c.pipe.Counters.AddTo(&sum)
				if n := sum.Resegmented[0] + sum.Resegmented[1]; n != 0 {
					t.Errorf("%d segments re-encoded; want none", n)
				}
			})
		}
	}
}

// oneLegacy is pathConnV5.one for a v4 connection: the per-frame work of the transports
// on one request frame and one response frame, header checks included, as relay does it.
func (pc *pathConnV5) oneLegacy(tb testing.TB) int {
	c := pc.c
	pc.stream = (pc.stream + 1) % v5Streams
	req, resp := pc.reqs[pc.stream], pc.resps[pc.stream]
	h, pe := c.requestHeader(req)
	if pe != nil {
		tb.Fatal(pe)
	}
	c.traceFrame(h, true)
	if tk, _ := c.pipe.Request(h, req, len(req), nil); tk.Events() {
		pc.sent = append(pc.sent[:0], tk)
		c.pipe.Wrote(pc.sent, false)
	}
	rh, err := c.responseHeader(resp)
	if err != nil {
		tb.Fatal(err)
	}
	c.traceFrame(rh, false)
	var r pipeline.Inflight
	c.pipe.Streams.RequestFor(rh, &r)
	var arrived int64
	out, d := c.pipe.Response(rh, resp, &r, &arrived)
	c.pipe.Queued(r, arrived)
	c.pipe.Counters.Answered(len(out))
	if d.Events() {
		pc.done = append(pc.done[:0], d)
		c.pipe.Wrote(pc.done, true)
	}
	return len(out)
}

// newPathConnV4 is newPathConnV5 for a v4 connection: the same frames, unframed.
func newPathConnV4(tb testing.TB, cfg tracing.Config) *pathConnV5 {
	tb.Helper()
	pc := &pathConnV5{pathConn: newPathConn(tb, cfg)}
	body := cql.Query{Query: "INSERT INTO ks.t (k, v) VALUES (1, 2)", Params: cql.QueryParams{Consistency: cql.One}}.AppendBody(nil, cql.V4)
	for s := range v5Streams {
		pc.reqs = append(pc.reqs, frame(cql.V4, 0, int16(s), cql.OpQuery, body))
		pc.resps = append(pc.resps, frame(cql.ResponseBit|cql.V4, 0, int16(s), cql.OpResult, voidBody()))
	}
	return pc
}

// BenchmarkRequestPathV5 is the transports' per-frame work on one request and its
// response, header checks included, at v4 (frames) and at v5 (each in a segment, both
// CRCs checked, lz4 decompressed with lz4, forwarded as it came), per tracing mode: the
// difference between v4 and v5 is what v5's framing costs the sidecar per request.
func BenchmarkRequestPathV5(b *testing.B) {
	for _, tc := range []struct {
		name string
		cfg  tracing.Config
	}{
		{"off", tracing.DefaultConfig()},
		{"fast", tracing.Config{Enable: true, Fast: true, ThresholdMicros: 1e12}},
		{"full", tracing.Config{Enable: true, ThresholdMicros: 1e12}},
	} {
		for _, framing := range []string{"v4", "v5", "v5-lz4"} {
			b.Run(tc.name+"/"+framing, func(b *testing.B) {
				one := func() {}
				switch framing {
				case "v4":
					pc := newPathConnV4(b, tc.cfg)
					one = func() { pc.oneLegacy(b) }
				default:
					pc := newPathConnV5(b, tc.cfg, framing == "v5-lz4")
					one = func() { pc.one(b) }
				}
				b.ReportAllocs()
				for b.Loop() {
					one()
				}
			})
		}
	}
}

// FuzzV5Segments feeds the segment layer of both sides what a client or a node may send:
// raw bytes read as segments (lying lengths, bad CRCs), and the fuzzer's bytes as frames
// inside valid segments, lz4 or not, cut at the fuzzer's byte as two reads would. It must
// never panic; what it forwards must be valid segments whose frames line up.
func FuzzV5Segments(f *testing.F) {
	q := frame(cql.V5, 0, 1, cql.OpQuery, cql.Query{Query: "SELECT * FROM system.local", Params: cql.QueryParams{Consistency: cql.One}}.AppendBody(nil, cql.V5))
	f.Add(q, false, false, uint16(3))
	f.Add(q, true, true, uint16(40))
	f.Add(cql.AppendSegments(nil, q, false), false, true, uint16(7))
	f.Add(frame(cql.ResponseBit|cql.V5, 0, 1, cql.OpResult, voidBody()), false, false, uint16(0))
	f.Fuzz(func(t *testing.T, b []byte, lz4, raw bool, cut uint16) {
		for _, client := range []bool{true, false} {
			pc := newPathConnV5(t, tracing.Config{Enable: true, ThresholdMicros: 0}, lz4)
			c := pc.c
			in := b
			if !raw {
				in = cql.AppendSegments(nil, b, lz4)
			}
			at := int(cut) % (len(in) + 1)
			pend := append([]byte(nil), in[:at]...)
			rest := in[at:]
			check := cql.SegmentReader{LZ4: lz4}
			for round := 0; round < 2; round++ {
				for len(pend) > 0 {
					n, err := segments{c}.segmentHead(pend, client)
					if err != nil || n == 0 || n > len(pend) {
						break
					}
					var out []byte
					if client {
						out, _, err = segments{c}.requestSegment(pend[:n], nil)
					} else {
						var arrived int64
						out, _, _, err = segments{c}.responseSegment(pend[:n], &arrived, nil)
					}
					if err != nil {
						return
					}
					for len(out) > 0 {
						m, _, _, err := check.Next(out)
						if err != nil || m == 0 {
							t.Fatalf("forwarded %x: %d, %v; want whole, valid segments", out, m, err)
						}
						out = out[m:]
					}
					pend = pend[n:]
				}
				pend, rest = append(pend, rest...), nil
			}
		}
	})
}
