package tracing

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/tracecar/tracecar/internal/cql"
)

// TestFastThresholdZero checks that fast mode with threshold 0 records every CQL request
// with its text, consistency and duration, and no events.
func TestFastThresholdZero(t *testing.T) {
	batch := cql.Batch{Type: cql.BatchUnlogged, Consistency: cql.Quorum, Queries: []cql.BatchQuery{
		{Query: "INSERT INTO ks.t (k) VALUES (?)", Values: []cql.Value{{Bytes: []byte{1, 2}}}},
		{Prepared: true, ID: testID, Values: []cql.Value{{Bytes: []byte("abc")}, {}}},
	}}
	tests := []struct {
		name        string
		msg         cql.Message
		comp        cql.Compressor
		wantCommand string
		wantRequest string
		wantParams  map[string]string
	}{
		{
			name: "execute", msg: executeMsg([]byte("12345678")),
			wantCommand: "EXECUTE", wantRequest: RequestExecute,
			wantParams: map[string]string{"query": testQuery, "consistency_level": "LOCAL_ONE",
				"page_size": "5000", "param[0]": "<redacted: 8 bytes>"},
		},
		{
			name: "execute lz4", msg: executeMsg([]byte("12345678")), comp: cql.LZ4{},
			wantCommand: "EXECUTE", wantRequest: RequestExecute,
			wantParams: map[string]string{"query": testQuery, "consistency_level": "LOCAL_ONE",
				"page_size": "5000", "param[0]": "<redacted: 8 bytes>"},
		},
		{
			name: "query snappy", comp: cql.Snappy{},
			msg: cql.Query{Query: "SELECT now() FROM system.local", Params: cql.QueryParams{
				Consistency: cql.One, Flags: cql.QuerySerialConsistency, SerialConsistency: cql.LocalSerial}},
			wantCommand: "QUERY", wantRequest: RequestQuery,
			wantParams: map[string]string{"query": "SELECT now() FROM system.local", "consistency_level": "ONE",
				"serial_consistency_level": "LOCAL_SERIAL"},
		},
		{
			name: "batch", msg: batch,
			wantCommand: "BATCH", wantRequest: RequestBatch,
			wantParams: map[string]string{"batch_type": "UNLOGGED", "query[0]": "INSERT INTO ks.t (k) VALUES (?)",
				"query[1]": testQuery, "param[0][0]": "<redacted: 2 bytes>", "param[1][0]": "<redacted: 3 bytes>",
				"param[1][1]": "null", "consistency_level": "QUORUM"},
		},
		{
			name: "prepare", msg: cql.Prepare{Query: "SELECT 1"},
			wantCommand: "PREPARE", wantRequest: RequestPrepare,
			wantParams: map[string]string{"query": "SELECT ?"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := New(Options{})
			defer mustClose(t, tr)
			c := newCaller(tr, testClient, testCoord)
			defer c.Close()
			prepare(t, c, 1)
			mustConfig(t, tr, Config{Enable: true, Fast: true})

			h, f := mustRequest(t, reqHeader(7, 0), tt.msg, tt.comp)
			orig := bytes.Clone(f)
			c.OnRequest(h, f, tt.comp)
			if !bytes.Equal(f, orig) {
				t.Errorf("fast mode changed the request frame")
			}
			clear(f) // OnRequest must not retain the frame
			rh, rf := mustResponse(t, respHeader(7, 0), cql.ResponsePrefix{}, cql.VoidResult{}, tt.comp)
			out := c.OnResponse(rh, rf, tt.comp)
			if &out[0] != &rf[0] {
				t.Errorf("OnResponse returned a new frame in fast mode")
			}
			c.ResponseSent(7)

			got := tr.SlowLog(0)
			if len(got) != 1 {
				t.Fatalf("SlowLog has %d sessions; want 1", len(got))
			}
			s := got[0]
			if s.Mode != ModeFast || s.Command != tt.wantCommand || s.Request != tt.wantRequest {
				t.Errorf("mode, command, request = %q, %q, %q; want fast, %q, %q",
					s.Mode, s.Command, s.Request, tt.wantCommand, tt.wantRequest)
			}
			if fmt.Sprint(s.Parameters) != fmt.Sprint(tt.wantParams) {
				t.Errorf("parameters = %v;\nwant %v", s.Parameters, tt.wantParams)
			}
			if len(s.Events) != 0 {
				t.Errorf("events = %v; want none in fast mode", s.Events)
			}
			if s.DurationUS < 0 || s.StartedAt.IsZero() || s.Client != testClient.String() || s.Coordinator != testCoord.String() {
				t.Errorf("duration, started, client, coordinator = %d, %v, %q, %q", s.DurationUS, s.StartedAt, s.Client, s.Coordinator)
			}
			if _, err := cql.ParseUUID(s.ID); err != nil {
				t.Errorf("session id %q: %v", s.ID, err)
			}
			if got, ok := tr.Session(s.ID); !ok || got.ID != s.ID {
				t.Errorf("Session(%q) = %v; want it found", s.ID, ok)
			}
		})
	}
}

// TestNotRecorded checks the paths that must leave no session: off, below the threshold,
// requests that carry no CQL, and a fast request whose mode was switched off and on.
func TestNotRecorded(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		msg  cql.Message
		flip bool // switch tracing off and on between request and response
	}{
		{name: "off", cfg: DefaultConfig(), msg: executeMsg([]byte("x"))},
		{name: "fast below threshold", cfg: Config{Enable: true, Fast: true, ThresholdMicros: 1e12}, msg: executeMsg()},
		{name: "full below threshold", cfg: Config{Enable: true, ThresholdMicros: 1e12}, msg: executeMsg()},
		{name: "options", cfg: Config{Enable: true, Fast: true}, msg: cql.Options{}},
		{name: "auth response", cfg: Config{Enable: true}, msg: cql.AuthResponse{Token: []byte("\x00u\x00secret")}},
		{name: "fast across off", cfg: Config{Enable: true, Fast: true}, msg: executeMsg(), flip: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := New(Options{})
			defer mustClose(t, tr)
			c := newCaller(tr, testClient, testCoord)
			defer c.Close()
			mustConfig(t, tr, tt.cfg)
			h, f := mustRequest(t, reqHeader(3, 0), tt.msg, nil)
			c.OnRequest(h, f, nil)
			if f[1] != 0 {
				t.Errorf("request flags = %#x; want 0", f[1])
			}
			c.Sent(3)
			if tt.flip {
				mustConfig(t, tr, DefaultConfig())
				mustConfig(t, tr, tt.cfg)
			}
			rh, rf := mustResponse(t, respHeader(3, 0), cql.ResponsePrefix{}, cql.VoidResult{}, nil)
			if out := c.OnResponse(rh, rf, nil); !bytes.Equal(out, rf) {
				t.Errorf("OnResponse changed the frame")
			}
			c.ResponseSent(3)
			if got := tr.SlowLog(0); len(got) != 0 {
				t.Errorf("SlowLog = %+v; want empty", got)
			}
		})
	}
}

func TestFullModeEvents(t *testing.T) {
	tr := New(Options{})
	defer mustClose(t, tr)
	c := newCaller(tr, testClient, testCoord)
	defer c.Close()
	prepare(t, c, 1)
	mustConfig(t, tr, Config{Enable: true})

	h, f := mustRequest(t, reqHeader(9, 0), executeMsg([]byte("v")), cql.LZ4{})
	c.OnRequest(h, f, cql.LZ4{})
	if f[1] != cql.FlagCompression {
		t.Errorf("request flags = %#x; want only compression: full mode must not ask the node to trace", f[1])
	}
	c.Sent(9)
	rh, rf := mustResponse(t, respHeader(9, 0), cql.ResponsePrefix{}, rowsMsg(), cql.LZ4{})
	c.OnResponse(rh, rf, cql.LZ4{})
	if got := tr.SlowLog(0); len(got) != 0 {
		t.Fatalf("session recorded before ResponseSent: %+v", got)
	}
	c.ResponseSent(9)

	got := tr.SlowLog(0)
	if len(got) != 1 {
		t.Fatalf("SlowLog has %d sessions; want 1", len(got))
	}
	s := got[0]
	want := []string{"sidecar:" + EventReceived, "sidecar:" + EventParsed, "sidecar:" + EventSentToNode,
		"sidecar:" + EventNodeResponded, "sidecar:" + EventResponseSent}
	if fmt.Sprint(activities(s.Events)) != fmt.Sprint(want) {
		t.Errorf("events = %v; want %v", activities(s.Events), want)
	}
	for i := 1; i < len(s.Events); i++ {
		if s.Events[i].SourceElapsedUS < s.Events[i-1].SourceElapsedUS {
			t.Errorf("event %d elapsed %d < previous %d", i, s.Events[i].SourceElapsedUS, s.Events[i-1].SourceElapsedUS)
		}
	}
	if s.Mode != ModeFull || s.Parameters["query"] != testQuery || s.Parameters["consistency_level"] != "LOCAL_ONE" {
		t.Errorf("mode %q, parameters %v; want full with the query and LOCAL_ONE", s.Mode, s.Parameters)
	}
	if st := tr.Stats(); st.Traced != 1 || st.SlowSessions != 1 {
		t.Errorf("Stats() traced, slow = %d, %d; want 1, 1", st.Traced, st.SlowSessions)
	}
}

func TestBindValues(t *testing.T) {
	v := []byte{0xca, 0xfe, 0, 1, 2, 3, 4, 5}
	tests := []struct {
		name string
		bind bool
		want string
	}{
		{name: "redacted by default", bind: false, want: "<redacted: 8 bytes>"},
		{name: "opted in", bind: true, want: "0xcafe000102030405"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, mode := range []Config{{Enable: true, Fast: true}, {Enable: true}} {
				tr := New(Options{BindValues: tt.bind})
				c := newCaller(tr, testClient, testCoord)
				mustConfig(t, tr, mode)
				h, f := mustRequest(t, reqHeader(1, 0), executeMsg(v, nil), nil)
				c.OnRequest(h, f, nil)
				rh, rf := mustResponse(t, respHeader(1, 0), cql.ResponsePrefix{}, cql.VoidResult{}, nil)
				c.OnResponse(rh, rf, nil)
				c.ResponseSent(1)
				got := tr.SlowLog(0)
				if len(got) != 1 {
					t.Fatalf("%s: %d sessions; want 1", mode.Mode(), len(got))
				}
				if p := got[0].Parameters; p["param[0]"] != tt.want || p["param[1]"] != "null" {
					t.Errorf("%s: param[0], param[1] = %q, %q; want %q, null", mode.Mode(), p["param[0]"], p["param[1]"], tt.want)
				}
				if !tt.bind {
					for k, pv := range got[0].Parameters {
						if strings.Contains(pv, "cafe") {
							t.Errorf("%s: parameter %s leaks the bound value: %q", mode.Mode(), k, pv)
						}
					}
				}
				c.Close()
				mustClose(t, tr)
			}
		})
	}
}

func TestErrorResponse(t *testing.T) {
	for _, cfg := range []Config{{Enable: true, Fast: true}, {Enable: true}} {
		t.Run(cfg.Mode(), func(t *testing.T) {
			tr := New(Options{})
			defer mustClose(t, tr)
			c := newCaller(tr, testClient, testCoord)
			defer c.Close()
			mustConfig(t, tr, cfg)
			h, f := mustRequest(t, reqHeader(2, 0), cql.Query{Query: "SELECT * FROM nope"}, nil)
			c.OnRequest(h, f, nil)
			rh, rf := mustResponse(t, respHeader(2, cql.FlagWarning), cql.ResponsePrefix{Warnings: []string{"w"}},
				cql.Error{Code: cql.ErrCodeInvalid, Message: "unconfigured table nope"}, cql.Snappy{})
			c.OnResponse(rh, rf, cql.Snappy{})
			c.ResponseSent(2)
			got := tr.SlowLog(1)
			if len(got) != 1 {
				t.Fatalf("%d sessions; want 1", len(got))
			}
			if want := "invalid (0x2200): unconfigured table nope"; got[0].Error != want {
				t.Errorf("error = %q; want %q", got[0].Error, want)
			}
		})
	}
}

func TestTruncatedCapture(t *testing.T) {
	tr := New(Options{CaptureMax: 64})
	defer mustClose(t, tr)
	c := newCaller(tr, testClient, testCoord)
	defer c.Close()
	mustConfig(t, tr, Config{Enable: true, Fast: true})
	long := "SELECT * FROM t WHERE k IN (" + strings.Repeat("?,", 100) + "?)"
	h, f := mustRequest(t, reqHeader(4, 0), cql.Query{Query: long, Params: cql.QueryParams{Consistency: cql.One}}, nil)
	c.OnRequest(h, f, nil)
	rh, rf := mustResponse(t, respHeader(4, 0), cql.ResponsePrefix{}, cql.VoidResult{}, nil)
	c.OnResponse(rh, rf, nil)
	got := tr.SlowLog(0)
	if len(got) != 1 {
		t.Fatalf("%d sessions; want 1", len(got))
	}
	p := got[0].Parameters
	if p["truncated"] == "" || p["decode_error"] == "" {
		t.Errorf("parameters = %v; want truncated and decode_error", p)
	}
	if got[0].Command != "QUERY" {
		t.Errorf("command = %q; want QUERY", got[0].Command)
	}
}

func TestUnknownPreparedID(t *testing.T) {
	tr := New(Options{})
	defer mustClose(t, tr)
	c := newCaller(tr, testClient, testCoord)
	defer c.Close()
	mustConfig(t, tr, Config{Enable: true, Fast: true})
	h, f := mustRequest(t, reqHeader(1, 0), executeMsg(), nil)
	c.OnRequest(h, f, nil)
	rh, rf := mustResponse(t, respHeader(1, 0), cql.ResponsePrefix{}, cql.VoidResult{}, nil)
	c.OnResponse(rh, rf, nil)
	p := tr.SlowLog(0)[0].Parameters
	if _, ok := p["query"]; ok || p["prepared_id"] != "0xdeadbeef0102030405060708090a0b0c" {
		t.Errorf("parameters = %v; want no query and the prepared_id", p)
	}
}

// TestPreparedLearntWhileOff checks that PREPARE is learnt with tracing off, on another
// connection, and through lz4.
func TestPreparedLearntWhileOff(t *testing.T) {
	tr := New(Options{})
	defer mustClose(t, tr)
	c1 := newCaller(tr, testClient, testCoord)
	h, f := mustRequest(t, reqHeader(5, 0), cql.Prepare{Query: testQuery}, cql.LZ4{})
	c1.OnRequest(h, f, cql.LZ4{})
	rh, rf := mustResponse(t, respHeader(5, cql.FlagWarning), cql.ResponsePrefix{Warnings: []string{"w"}},
		cql.PreparedResult{ID: testID}, cql.LZ4{})
	c1.OnResponse(rh, rf, cql.LZ4{})
	c1.Close()
	if q, ok := tr.prep.get(testID); !ok || q != testQuery {
		t.Fatalf("prepared map has %q, %v; want %q", q, ok, testQuery)
	}

	c2 := newCaller(tr, testClient, testCoord)
	defer c2.Close()
	mustConfig(t, tr, Config{Enable: true, Fast: true})
	h, f = mustRequest(t, reqHeader(5, 0), executeMsg(), nil)
	c2.OnRequest(h, f, nil)
	rh, rf = mustResponse(t, respHeader(5, 0), cql.ResponsePrefix{}, rowsMsg(), nil)
	c2.OnResponse(rh, rf, nil)
	if got := tr.SlowLog(1)[0].Parameters["query"]; got != testQuery {
		t.Errorf("query = %q; want %q", got, testQuery)
	}
}

// TestSampled checks a sampled request: the flag is set on the forwarded frame, the
// tracing id is stripped from the response (plain, lz4, snappy), the session takes the
// node's id and merges the node's events.
func TestSampled(t *testing.T) {
	tests := []struct {
		name  string
		comp  cql.Compressor
		warn  bool
		flags byte
	}{
		{name: "plain"},
		{name: "lz4", comp: cql.LZ4{}},
		{name: "snappy", comp: cql.Snappy{}},
		{name: "snappy with warnings", comp: cql.Snappy{}, warn: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := &fakeNode{complete: 2, events: []Event{
				{Activity: "Parsing a statement", SourceElapsedUS: 3},
				{Activity: "Processing a statement", SourceElapsedUS: 40},
			}}
			tr := New(Options{NodeEvents: node})
			c := newCaller(tr, testClient, testCoord)
			defer c.Close()
			prepare(t, c, 1)
			mustConfig(t, tr, Config{Probability: 1})

			h, f := mustRequest(t, reqHeader(6, 0), executeMsg([]byte("k")), tt.comp)
			c.OnRequest(h, f, tt.comp)
			if f[1]&cql.FlagTracing == 0 {
				t.Fatalf("request flags = %#x; want the tracing flag set", f[1])
			}
			c.Sent(6)

			var flags byte
			pre := cql.ResponsePrefix{TracingID: nodeID}
			if tt.warn {
				flags |= cql.FlagWarning
				pre.Warnings = []string{"batch too large"}
			}
			rh, rf := mustResponse(t, respHeader(6, flags|cql.FlagTracing), pre, rowsMsg(), tt.comp)
			_, want := mustResponse(t, respHeader(6, flags), pre, rowsMsg(), tt.comp)
			out := c.OnResponse(rh, rf, tt.comp)
			c.ResponseSent(6)

			if out[1]&cql.FlagTracing != 0 {
				t.Errorf("response flags = %#x; want the tracing flag cleared", out[1])
			}
			gh := mustHeader(t, out)
			if int(gh.Length) != len(out)-cql.HeaderSize {
				t.Errorf("response length field = %d; want %d", gh.Length, len(out)-cql.HeaderSize)
			}
			if gotBody, wantBody := mustBody(t, out, tt.comp), mustBody(t, want, tt.comp); !bytes.Equal(gotBody, wantBody) {
				t.Errorf("stripped body = %x;\nwant %x", gotBody, wantBody)
			}
			// An uncompressed response changes only in its header, moved over the id: the
			// rest is forwarded from where it was read, not copied.
			if tt.comp == nil && &out[len(out)-1] != &rf[len(rf)-1] {
				t.Errorf("the stripped plain response is a copy; want the end of the frame read, rewritten in place")
			}

			mustClose(t, tr) // flushes the node-event fetcher
			got := tr.SlowLog(0)
			if len(got) != 1 {
				t.Fatalf("%d sessions; want 1", len(got))
			}
			s, ok := tr.Session(cql.FormatUUID(nodeID))
			if !ok {
				t.Fatalf("no session with the node's id %s in %+v", cql.FormatUUID(nodeID), got)
			}
			if s.Mode != ModeSampled || s.Parameters["query"] != testQuery {
				t.Errorf("mode %q, query %q; want sampled, %q", s.Mode, s.Parameters["query"], testQuery)
			}
			wantEv := []string{"sidecar:" + EventReceived, "sidecar:" + EventParsed, "sidecar:" + EventSentToNode,
				"node:Parsing a statement", "node:Processing a statement",
				"sidecar:" + EventNodeResponded, "sidecar:" + EventResponseSent}
			if fmt.Sprint(activities(s.Events)) != fmt.Sprint(wantEv) {
				t.Errorf("events = %v;\nwant %v", activities(s.Events), wantEv)
			}
			if len(node.asked) != 1 || node.asked[0] != nodeID {
				t.Errorf("node asked for the events of %x; want those of the node's session id, once", node.asked)
			}
		})
	}
}

func mustBody(tb testing.TB, frame []byte, comp cql.Compressor) []byte {
	tb.Helper()
	h := mustHeader(tb, frame)
	body, err := view(h, frame, comp).Body()
	if err != nil {
		tb.Fatalf("body: %v", err)
	}
	return body
}

// TestClientTracing checks that a client's own tracing request passes through untouched
// and is recorded with the node's id, even with tracing off.
func TestClientTracing(t *testing.T) {
	node := &fakeNode{complete: 1, events: []Event{{Activity: "Executing single-partition query", SourceElapsedUS: 12}}}
	tr := New(Options{NodeEvents: node})
	c := newCaller(tr, testClient, testCoord)
	defer c.Close()
	h, f := mustRequest(t, reqHeader(8, cql.FlagTracing), cql.Query{Query: "SELECT 1", Params: cql.QueryParams{Consistency: cql.One}}, nil)
	orig := bytes.Clone(f)
	c.OnRequest(h, f, nil)
	if !bytes.Equal(f, orig) {
		t.Errorf("request frame changed")
	}
	rh, rf := mustResponse(t, respHeader(8, cql.FlagTracing), cql.ResponsePrefix{TracingID: nodeID}, rowsMsg(), nil)
	c.Sent(8)
	origResp := bytes.Clone(rf)
	out := c.OnResponse(rh, rf, nil)
	if !bytes.Equal(out, origResp) {
		t.Errorf("response frame changed: the client asked for the tracing id")
	}
	c.ResponseSent(8)
	mustClose(t, tr)
	s, ok := tr.Session(cql.FormatUUID(nodeID))
	if !ok {
		t.Fatalf("no client session recorded: %+v", tr.SlowLog(0))
	}
	if s.Mode != ModeClient || len(s.Events) != 6 || s.Events[3].Source != SourceNode {
		t.Errorf("mode %q, events %v; want client with the node's event merged", s.Mode, activities(s.Events))
	}
}

// TestSinkDrops checks that a blocked sink never blocks recording and that what it cannot
// take is dropped and counted.
func TestSinkDrops(t *testing.T) {
	blocked := &memSink{name: "blocked", block: make(chan struct{})}
	fast := &memSink{name: "fast"}
	tr := New(Options{Sinks: []Sink{blocked, fast}, QueueSize: 1})
	c := newCaller(tr, testClient, testCoord)
	defer c.Close()
	mustConfig(t, tr, Config{Enable: true, Fast: true})
	const n = 10
	for range n {
		h, f := mustRequest(t, reqHeader(1, 0), executeMsg(), nil)
		c.OnRequest(h, f, nil)
		rh, rf := mustResponse(t, respHeader(1, 0), cql.ResponsePrefix{}, cql.VoidResult{}, nil)
		c.OnResponse(rh, rf, nil)
	}
	st := tr.Stats()
	// The worker holds at most one session in Write and the queue one more.
	if d := st.Dropped["blocked"]; d < n-2 {
		t.Errorf("Dropped[blocked] = %d; want at least %d", d, n-2)
	}
	if st.SlowSessions != n {
		t.Errorf("SlowSessions = %d; want %d", st.SlowSessions, n)
	}
	close(blocked.block)
	mustClose(t, tr)
	st = tr.Stats()
	if got := uint64(len(blocked.sessions())) + st.Dropped["blocked"]; got != n {
		t.Errorf("blocked sink: delivered + dropped = %d; want %d", got, n)
	}
	if got := uint64(len(fast.sessions())) + st.Dropped["fast"]; got != n {
		t.Errorf("fast sink: delivered + dropped = %d; want %d", got, n)
	}
}

// TestConcurrentSides runs the request and response sides on two goroutines, as the
// sidecar does, for the race detector.
func TestConcurrentSides(t *testing.T) {
	for _, cfg := range []Config{{Enable: true, Fast: true}, {Enable: true}, {Probability: 0.5, Enable: true, Fast: true}} {
		t.Run(cfg.Mode(), func(t *testing.T) {
			tr := New(Options{NodeEvents: &fakeNode{complete: 1}, RingSize: 64})
			c := newCaller(tr, testClient, testCoord)
			mustConfig(t, tr, cfg)
			const n = 2000
			streams := make(chan int16, 64)
			done := make(chan struct{})
			go func() { // response side
				defer close(done)
				for st := range streams {
					rh, rf := mustResponse(t, respHeader(st, 0), cql.ResponsePrefix{}, cql.VoidResult{}, nil)
					c.OnResponse(rh, rf, nil)
					c.ResponseSent(st)
				}
			}()
			for i := range n {
				st := int16(i % 100)
				h, f := mustRequest(t, reqHeader(st, 0), executeMsg([]byte("v")), nil)
				c.OnRequest(h, f, nil)
				c.Sent(st)
				streams <- st
				if i%500 == 0 {
					_ = tr.Stats()
					_ = tr.SlowLog(10)
				}
			}
			close(streams)
			<-done
			c.Close()
			mustClose(t, tr)
		})
	}
}

// TestSentAfterResponse checks that a late "sent" notice (the writer was descheduled after
// its syscall while the node answered) still gives the five events, in order.
func TestSentAfterResponse(t *testing.T) {
	tr := New(Options{})
	defer mustClose(t, tr)
	c := newCaller(tr, testClient, testCoord)
	defer c.Close()
	mustConfig(t, tr, Config{Enable: true})
	h, f := mustRequest(t, reqHeader(9, 0), cql.Query{Query: "SELECT 1"}, nil)
	c.OnRequest(h, f, nil)
	rh, rf := mustResponse(t, respHeader(9, 0), cql.ResponsePrefix{}, cql.VoidResult{}, nil)
	c.OnResponse(rh, rf, nil)
	c.ResponseSent(9)
	c.Sent(9)
	got := tr.SlowLog(0)
	if len(got) != 1 {
		t.Fatalf("%d sessions; want 1", len(got))
	}
	want := []string{"sidecar:" + EventReceived, "sidecar:" + EventParsed, "sidecar:" + EventSentToNode,
		"sidecar:" + EventNodeResponded, "sidecar:" + EventResponseSent}
	if fmt.Sprint(activities(got[0].Events)) != fmt.Sprint(want) {
		t.Errorf("events = %v; want %v", activities(got[0].Events), want)
	}
}

// TestRequestsCountedByCaller checks that Stats reads its request count from the
// caller's counter (the proxy's one counter), not from a count of its own.
func TestRequestsCountedByCaller(t *testing.T) {
	tr := New(Options{})
	defer mustClose(t, tr)
	if got := tr.Stats().Requests; got != 0 {
		t.Errorf("Requests = %d without a counter; want 0", got)
	}
	var n uint64 = 41
	tr.CountRequests(func() uint64 { return n + 1 })
	if got := tr.Stats().Requests; got != 42 {
		t.Errorf("Requests = %d; want 42 from the caller's counter", got)
	}
}

// TestStaleSentIgnored checks that a Sent for a request that has ended does not touch the
// next request that reuses its record: the late notice of a partial write.
func TestStaleSentIgnored(t *testing.T) {
	tr := New(Options{})
	defer mustClose(t, tr)
	c := tr.NewConn(testClient, testCoord)
	defer c.Close()
	mustConfig(t, tr, Config{Enable: true})
	h, f := mustRequest(t, reqHeader(1, 0), cql.Query{Query: "SELECT 1"}, nil)
	rh, rf := mustResponse(t, respHeader(1, 0), cql.ResponsePrefix{}, cql.VoidResult{}, nil)
	old := c.Begin(view(h, f, nil), 0)
	_, done := c.End(old, view(rh, rf, nil), 0)
	c.Done(done, 0)
	next := c.Begin(view(h, f, nil), 0)
	if next.r != old.r {
		t.Fatalf("the second request did not reuse the first one's record")
	}
	old.Sent(1) // stale: must not become the second request's "sent to node"
	if got := next.r.sent.Load(); got != 0 {
		t.Errorf("second request's sent = %d after a stale Sent; want 0", got)
	}
	next.Sent(Now())
	if next.r.sent.Load() == 0 {
		t.Errorf("Sent of the live ticket was ignored")
	}
}
