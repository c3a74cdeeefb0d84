package sidecar

import (
	"net/netip"
	"testing"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/metrics"
	"github.com/tracecar/tracecar/tracing"
)

// pathConn is a conn without sockets, with metrics and a tracer, for driving the per-frame
// work that both paths run (request, taking the record, response, the notices after the
// writes) on one INSERT and its RESULT Void, stream after stream.
type pathConn struct {
	c          *conn
	tr         *tracing.Tracer
	req, resp  []byte
	rh, sh     cql.Header
	stream     int16
	sent, done []tracing.Ticket
}

func newPathConn(tb testing.TB, cfg tracing.Config) *pathConn {
	tb.Helper()
	tr := tracing.New(tracing.Options{})
	if err := tr.SetConfig(cfg); err != nil {
		tb.Fatal(err)
	}
	p := New(Config{NodeAddr: "127.0.0.1:9042", Metrics: metrics.New()}, tr)
	c := &conn{p: p, log: nopLogger, version: cql.V4}
	ap := netip.MustParseAddrPort("127.0.0.1:1")
	c.tr = tr.NewConn(ap, ap)
	tb.Cleanup(c.tr.Close)
	pc := &pathConn{c: c, tr: tr}
	pc.req = frame(cql.V4, 0, 0, cql.OpQuery, queryBody("INSERT INTO ks.t (k, v) VALUES (1, 2)"))
	pc.resp = frame(cql.ResponseBit|cql.V4, 0, 0, cql.OpResult, voidBody())
	pc.rh, _ = cql.ParseHeader(pc.req)
	pc.sh, _ = cql.ParseHeader(pc.resp)
	return pc
}

// one runs one request and its response, on the next stream id (drivers rotate through
// them), and returns the size of the response to forward.
func (pc *pathConn) one() int {
	c := pc.c
	pc.stream = (pc.stream + 1) & 1023
	pc.rh.Stream, pc.sh.Stream = pc.stream, pc.stream
	if tk := c.request(pc.rh, pc.req, len(pc.req)); tk.Events() {
		pc.sent = append(pc.sent[:0], tk)
		c.wrote(pc.sent, false)
	}
	r, _, _ := c.streams.take(pc.stream)
	now := tracing.Now()
	out, d := c.response(pc.sh, pc.resp, r, now)
	c.queued(r, now)
	if d.Events() {
		pc.done = append(pc.done[:0], d)
		c.wrote(pc.done, true)
	}
	return len(out)
}

// TestRequestPathAllocs asserts that the proxy's per-request work (the request's
// inspection, its in-flight record, tracing on both sides, the metrics, the counters and the notices
// of frames written) allocates nothing with tracing off, and in fast mode for requests
// that are not slow. Both the goroutine path and the event loop run exactly this per frame.
func TestRequestPathAllocs(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  tracing.Config
	}{
		{"off", tracing.DefaultConfig()},
		{"fast below threshold", tracing.Config{Enable: true, Fast: true, ThresholdMicros: 1e12}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc := newPathConn(t, tc.cfg)
			one := func() {
				if n := pc.one(); n != len(pc.resp) {
					t.Fatalf("response of %d bytes; want %d", n, len(pc.resp))
				}
			}
			for range 2048 { // grow the stream table and the tracing records
				one()
			}
			if n := testing.AllocsPerRun(1000, one); n != 0 {
				t.Errorf("%v allocations per request; want 0", n)
			}
			if tc.cfg.Enable && pc.tr.Stats().Traced != 0 {
				t.Errorf("traced %d requests; want none below the threshold", pc.tr.Stats().Traced)
			}
		})
	}
}
