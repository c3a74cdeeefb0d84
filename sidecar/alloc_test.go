package sidecar

import (
	"context"
	"slices"
	"testing"

	"github.com/tracecar/tracecar/audit"
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
	answers    []metrics.Answer
}

func newPathConn(tb testing.TB, cfg tracing.Config) *pathConn {
	tb.Helper()
	tr := tracing.New(tracing.Options{})
	if err := tr.SetConfig(cfg); err != nil {
		tb.Fatal(err)
	}
	p := New(Config{NodeAddr: "127.0.0.1:9042", Metrics: metrics.New()}, tr)
	c := socketlessConn(p, cql.V4)
	tb.Cleanup(c.pipe.EndTracing)
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
	if tk, _ := c.pipe.Request(pc.rh, pc.req, len(pc.req), nil); tk.Events() {
		pc.sent = append(pc.sent[:0], tk)
		c.pipe.Wrote(pc.sent, false)
	}
	r, _, _ := c.pipe.Streams.Take(pc.stream)
	now := tracing.Now()
	out, d := c.pipe.Response(pc.sh, pc.resp, &r, &now)
	if pc.stream&1 == 0 {
		c.pipe.Queued(r, now) // the goroutine path's metrics
	} else {
		// The event loop's, for the responses of one read.
		pc.answers = append(pc.answers[:0], metrics.Answer{Start: r.Start, Op: r.Op})
		c.p.sh.Metrics.Answered(pc.answers, now, tracing.Now())
	}
	if d.Events() {
		pc.done = append(pc.done[:0], d)
		c.pipe.Wrote(pc.done, true)
	}
	return len(out)
}

// TestRequestPathAllocs asserts that the proxy's per-request work (the request's
// inspection, its in-flight record, tracing on both sides, the metrics, the counters and the notices
// of frames written) allocates nothing with tracing off, in fast mode for requests that are
// not slow, and in full mode for requests that are not slow (each gets a session and its
// five events, then is not recorded). Both the goroutine path and the event loop run
// exactly this per frame.
func TestRequestPathAllocs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    tracing.Config
		traced bool // every request gets a session
		audit  bool // with an audit log, off: one atomic load
	}{
		{"off", tracing.DefaultConfig(), false, false},
		{"off with the audit log off", tracing.DefaultConfig(), false, true},
		{"fast below threshold", tracing.Config{Enable: true, Fast: true, ThresholdMicros: 1e12}, false, false},
		{"full below threshold", tracing.Config{Enable: true, ThresholdMicros: 1e12}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc := newPathConn(t, tc.cfg)
			if tc.audit {
				l := audit.New(audit.Block, 16)
				t.Cleanup(func() { l.Close(context.Background()) })
				pc.c.p.sh.Audit = l
			}
			one := func() {
				if n := pc.one(); n != len(pc.resp) {
					t.Fatalf("response of %d bytes; want %d", n, len(pc.resp))
				}
			}
			for range 2048 { // grow the stream table and the tracing records
				one()
			}
			before := pc.tr.Stats().Traced
			if n := testing.AllocsPerRun(1000, one); n != 0 {
				t.Errorf("%v allocations per request; want 0", n)
			}
			st := pc.tr.Stats()
			switch {
			case tc.traced && st.Traced-before < 1000:
				t.Errorf("traced %d of the last 1001 requests; want all", st.Traced-before)
			case !tc.traced && st.Traced != 0:
				t.Errorf("traced %d requests; want none below the threshold", st.Traced)
			}
			if st.SlowSessions != 0 {
				t.Errorf("recorded %d sessions; want none below the threshold", st.SlowSessions)
			}
			if !tc.traced {
				return
			}
			// The same path with threshold 0 records what it traced: the five events.
			cfg := tc.cfg
			cfg.ThresholdMicros = 0
			if err := pc.tr.SetConfig(cfg); err != nil {
				t.Fatal(err)
			}
			one()
			var got []string
			waitFor(t, "the session of a request at threshold 0", func() bool {
				ss := pc.tr.SlowLog(1)
				if len(ss) == 0 {
					return false
				}
				got = got[:0]
				for _, e := range ss[0].Events {
					got = append(got, e.Activity)
				}
				return true
			})
			want := []string{tracing.EventReceived, tracing.EventParsed, tracing.EventSentToNode, tracing.EventNodeResponded, tracing.EventResponseSent}
			if !slices.Equal(got, want) {
				t.Errorf("events %q; want %q", got, want)
			}
		})
	}
}
