package sidecar

import (
	"net/netip"
	"testing"

	"github.com/tracecar/tracecar/cql"
	"github.com/tracecar/tracecar/metrics"
	"github.com/tracecar/tracecar/tracing"
)

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
			tr := tracing.New(tracing.Options{})
			if err := tr.SetConfig(tc.cfg); err != nil {
				t.Fatal(err)
			}
			p := New(Config{NodeAddr: "127.0.0.1:9042", Metrics: metrics.New()}, tr)
			c := &conn{p: p, log: nopLogger, version: cql.V4}
			ap := netip.MustParseAddrPort("127.0.0.1:1")
			c.tr = tr.NewConn(ap, ap)
			defer c.tr.Close()

			req := frame(cql.V4, 0, 0, cql.OpQuery, queryBody("INSERT INTO ks.t (k, v) VALUES (1, 2)"))
			resp := frame(cql.ResponseBit|cql.V4, 0, 0, cql.OpResult, voidBody())
			rh, _ := cql.ParseHeader(req)
			sh, _ := cql.ParseHeader(resp)
			var stream int16
			one := func() {
				stream = (stream + 1) & 1023 // drivers rotate through stream ids
				rh.Stream, sh.Stream = stream, stream
				if tk := c.request(rh, req, len(req)); tk.Events() {
					c.wrote([]tracing.Ticket{tk}, false)
				}
				r, _, _ := c.streams.take(stream)
				out, done := c.response(sh, resp, r, tracing.Now())
				c.queued(r, tracing.Now())
				if len(out) != len(resp) {
					t.Fatalf("response of %d bytes; want %d", len(out), len(resp))
				}
				if done.Events() {
					c.wrote([]tracing.Ticket{done}, true)
				}
			}
			for range 2048 { // grow the stream table and the tracing records
				one()
			}
			if n := testing.AllocsPerRun(1000, one); n != 0 {
				t.Errorf("%v allocations per request; want 0", n)
			}
			if tc.cfg.Enable && tr.Stats().Traced != 0 {
				t.Errorf("traced %d requests; want none below the threshold", tr.Stats().Traced)
			}
		})
	}
}
