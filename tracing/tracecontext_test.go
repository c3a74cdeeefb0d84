package tracing

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tracecar/tracecar/internal/cql"
)

const (
	testTraceID  = "4bf92f3577b34da6a3ce929d0e0e4736"
	testParentID = "00f067aa0ba902b7"
	testSampled  = "00-" + testTraceID + "-" + testParentID + "-01"
)

// invalidTraceparents are the W3C specification's invalid traceparent values (its
// examples and its test suite's cases), each with the reason it is ignored.
var invalidTraceparents = []struct {
	name, value string
	reason      InvalidReason
}{
	{"empty", "", ReasonLength},
	{"too short", "00-" + testTraceID + "-" + testParentID + "-0", ReasonLength},
	{"version 00 with more after it", testSampled + "-what-the-future-holds", ReasonLength},
	{"version 00, one byte too many", testSampled + "0", ReasonLength},
	{"version ff", "ff-" + testTraceID + "-" + testParentID + "-01", ReasonVersion},
	{"version upper-case hex", "0A-" + testTraceID + "-" + testParentID + "-01", ReasonVersion},
	{"version not hex", "0g-" + testTraceID + "-" + testParentID + "-01", ReasonVersion},
	{"trace id upper-case hex", "00-" + strings.ToUpper(testTraceID) + "-" + testParentID + "-01", ReasonHex},
	{"parent id upper-case hex", "00-" + testTraceID + "-00F067AA0BA902B7-01", ReasonHex},
	{"trace id not hex", "00-4bf92f3577b34da6a3ce929d0e0e473g-" + testParentID + "-01", ReasonHex},
	{"parent id not hex", "00-" + testTraceID + "-00f067aa0ba902bz-01", ReasonHex},
	{"flags not hex", "00-" + testTraceID + "-" + testParentID + "-0x", ReasonHex},
	{"flags upper-case hex", "00-" + testTraceID + "-" + testParentID + "-0A", ReasonHex},
	{"trace id all zeros", "00-00000000000000000000000000000000-" + testParentID + "-01", ReasonZeroTraceID},
	{"parent id all zeros", "00-" + testTraceID + "-0000000000000000-01", ReasonZeroParentID},
	{"underscores for dashes", "00_" + testTraceID + "_" + testParentID + "_01", ReasonDelimiter},
	{"trace id one short, parent one long", "00-" + testTraceID[:31] + "-0" + testParentID + "-01", ReasonDelimiter},
	{"a later version with no dash after the flags", "cc-" + testTraceID + "-" + testParentID + "-01.what", ReasonDelimiter},
	{"leading space", " " + testSampled[:54], ReasonVersion},
	{"trailing space", testSampled + " ", ReasonLength},
}

func TestParseTraceparent(t *testing.T) {
	valid := []struct {
		name, value string
		flags       byte
	}{
		{"sampled", testSampled, 0x01},
		{"not sampled", "00-" + testTraceID + "-" + testParentID + "-00", 0x00},
		{"unknown flags are kept", "00-" + testTraceID + "-" + testParentID + "-ff", 0xff},
		{"a later version, its extra fields ignored", "cc-" + testTraceID + "-" + testParentID + "-01-what-the-future-holds", 0x01},
		{"a later version without extra fields", "01-" + testTraceID + "-" + testParentID + "-01", 0x01},
	}
	for _, tt := range valid {
		t.Run(tt.name, func(t *testing.T) {
			tc, why := ParseTraceparent([]byte(tt.value))
			if why != 0 {
				t.Fatalf("ParseTraceparent(%q): ignored for %s; want valid", tt.value, why)
			}
			if got := fmt.Sprintf("%x-%x", tc.TraceID, tc.SpanID); got != testTraceID+"-"+testParentID || tc.Flags != tt.flags {
				t.Errorf("ParseTraceparent(%q) = %s flags %02x; want %s-%s flags %02x", tt.value, got, tc.Flags, testTraceID, testParentID, tt.flags)
			}
			if tc.Sampled() != (tt.flags&1 != 0) {
				t.Errorf("Sampled() = %v with flags %02x", tc.Sampled(), tt.flags)
			}
		})
	}
	for _, tt := range invalidTraceparents {
		t.Run(tt.name, func(t *testing.T) {
			tc, why := ParseTraceparent([]byte(tt.value))
			if why != tt.reason || tc.Valid() {
				t.Errorf("ParseTraceparent(%q) = valid %v, reason %q; want ignored for %q", tt.value, tc.Valid(), why, tt.reason)
			}
		})
	}
}

func TestTraceContextString(t *testing.T) {
	tc, _ := ParseTraceparent([]byte(testSampled))
	if got := tc.String(); got != testSampled {
		t.Errorf("String() = %q; want %q", got, testSampled)
	}
	if got := (TraceContext{}).String(); got != "" {
		t.Errorf("zero String() = %q; want empty", got)
	}
}

func TestValidTraceState(t *testing.T) {
	many := func(n int) string {
		var m []string
		for i := range n {
			m = append(m, fmt.Sprintf("k%d=v", i))
		}
		return strings.Join(m, ",")
	}
	tests := []struct {
		name, value string
		want        bool
	}{
		{"one member", "rojo=00f067aa0ba902b7", true},
		{"two members with spaces", "rojo=00f067aa0ba902b7 ,\tcongo=t61rcWkgMzE", true},
		{"multi-tenant key", "fw529a3039@dt=b7ad6b7169203331", true},
		{"empty members", "a=1,,b=2,", true},
		{"value with spaces and symbols", "a=x y!#$%&'()*+-./:;<>?@[]^_`{|}~", true},
		{"32 members", many(32), true},
		{"33 members", many(33), false},
		{"duplicate key", "a=1,b=2,a=3", false},
		{"duplicate key behind spaces", " a=1 ,\ta=2", false},
		{"a key that starts another", "ab=1,a=2", true},
		{"upper-case key", "Rojo=1", false},
		{"key starting with a digit", "1a=1", false},
		{"no equals sign", "rojo", false},
		{"empty value", "a=", false},
		{"value ending in a space", "a=1 x ", true}, // the member is trimmed first
		{"value with an equals sign", "a=b=c", false},
		{"value with a non-ASCII byte", "a=caf\xc3\xa9", false},
		{"system id too long", "t@abcdefghijklmno=1", false},
		{"too long", "a=" + strings.Repeat("x", 511), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ValidTraceState([]byte(tt.value)); got != tt.want {
				t.Errorf("ValidTraceState(%q) = %v; want %v", tt.value, got, tt.want)
			}
		})
	}
}

// traceparentOracle is the specification's grammar as a regular expression, written apart
// from ParseTraceparent so that the fuzzer can compare the two.
var traceparentOracle = regexp.MustCompile(`(?s)^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$`)

func oracleValid(v string) bool {
	m := traceparentOracle.FindStringSubmatch(v)
	switch {
	case m == nil, m[1] == "ff", m[1] == "00" && m[5] != "":
		return false
	case m[2] == strings.Repeat("0", 32), m[3] == strings.Repeat("0", 16):
		return false
	}
	return true
}

// FuzzTraceparent checks ParseTraceparent against the grammar: it never panics, it accepts
// exactly what the oracle accepts, and what it accepts prints back as the value's first 55
// bytes (version 00).
func FuzzTraceparent(f *testing.F) {
	f.Add(testSampled)
	f.Add("cc-" + testTraceID + "-" + testParentID + "-01-future")
	for _, tt := range invalidTraceparents {
		f.Add(tt.value)
	}
	f.Fuzz(func(t *testing.T, v string) {
		tc, why := ParseTraceparent([]byte(v))
		if want := oracleValid(v); tc.Valid() != want || (why == 0) != want {
			t.Fatalf("ParseTraceparent(%q): valid %v reason %q; the grammar says valid %v", v, tc.Valid(), why, want)
		}
		if tc.Valid() && tc.String()[3:] != v[3:55] {
			t.Fatalf("ParseTraceparent(%q) prints back as %q", v, tc.String())
		}
	})
}

// FuzzTraceState checks that ValidTraceState never panics and that whatever it accepts the
// OpenTelemetry SDK, which the span exporter uses, reads too, member for member.
func FuzzTraceState(f *testing.F) {
	for _, s := range []string{"rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", "a=1,,b=2", "fw529a3039@dt=b7ad6b7169203331", "a=b=c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if !ValidTraceState([]byte(v)) {
			return
		}
		ts, err := trace.ParseTraceState(normalizeState(v))
		if err != nil {
			t.Fatalf("ValidTraceState(%q) = true, but the SDK refuses it: %v", v, err)
		}
		members := 0
		for _, m := range strings.Split(v, ",") {
			if strings.Trim(m, " \t") != "" {
				members++
			}
		}
		if ts.Len() != members {
			t.Fatalf("ValidTraceState(%q): %d members; the SDK reads %d (%s)", v, members, ts.Len(), ts)
		}
	})
}

// payloadRequest returns an EXECUTE of testID with payload as its custom payload.
func payloadRequest(tb testing.TB, stream int16, payload map[string][]byte, comp cql.Compressor) (cql.Header, []byte) {
	tb.Helper()
	flags := byte(0)
	if payload != nil {
		flags = cql.FlagCustomPayload
	}
	f, err := cql.AppendRequestFrame(nil, reqHeader(stream, flags), payload, executeMsg([]byte("k")), comp)
	if err != nil {
		tb.Fatalf("encode request: %v", err)
	}
	return mustHeader(tb, f), f
}

// exchange runs one request and its response through c, as the sidecar does.
func exchange(tb testing.TB, c *caller, stream int16, payload map[string][]byte, comp cql.Compressor) []byte {
	tb.Helper()
	h, f := payloadRequest(tb, stream, payload, comp)
	orig := append([]byte(nil), f...)
	c.OnRequest(h, f, comp)
	c.Sent(stream)
	flags := byte(0)
	if f[1]&cql.FlagTracing != 0 && orig[1]&cql.FlagTracing == 0 {
		flags = cql.FlagTracing // the node answers the tracing flag the sidecar set
	}
	rh, rf := mustResponse(tb, respHeader(stream, flags), cql.ResponsePrefix{TracingID: nodeID}, rowsMsg(), comp)
	c.OnResponse(rh, rf, comp)
	c.ResponseSent(stream)
	return f
}

func TestTraceContextRecorded(t *testing.T) {
	ctx := map[string][]byte{"traceparent": []byte(testSampled), "tracestate": []byte("rojo=00f067aa0ba902b7")}
	tests := []struct {
		name    string
		cfg     Config
		comp    cql.Compressor
		payload map[string][]byte
		keys    []string
		mode    string
		traceID string
		state   string
	}{
		{name: "full", cfg: Config{Enable: true}, payload: ctx, mode: ModeFull, traceID: testTraceID, state: "rojo=00f067aa0ba902b7"},
		{name: "fast", cfg: Config{Enable: true, Fast: true}, payload: ctx, mode: ModeFast, traceID: testTraceID, state: "rojo=00f067aa0ba902b7"},
		{name: "fast lz4, read at the slow request's end", cfg: Config{Enable: true, Fast: true}, comp: cql.LZ4{}, payload: ctx, mode: ModeFast, traceID: testTraceID, state: "rojo=00f067aa0ba902b7"},
		{name: "full snappy", cfg: Config{Enable: true}, comp: cql.Snappy{}, payload: ctx, mode: ModeFull, traceID: testTraceID, state: "rojo=00f067aa0ba902b7"},
		{name: "sampled", cfg: Config{Probability: 1}, payload: ctx, mode: ModeSampled, traceID: testTraceID, state: "rojo=00f067aa0ba902b7"},
		{name: "no payload", cfg: Config{Enable: true}, mode: ModeFull},
		{name: "other payload keys only", cfg: Config{Enable: true}, payload: map[string][]byte{"request-id": []byte("x")}, mode: ModeFull},
		{name: "malformed tracestate dropped, traceparent kept", cfg: Config{Enable: true},
			payload: map[string][]byte{"traceparent": []byte(testSampled), "tracestate": []byte("Bad=1")}, mode: ModeFull, traceID: testTraceID},
		{name: "another key", cfg: Config{Enable: true}, keys: []string{"x-trace", "traceparent"},
			payload: map[string][]byte{"x-trace": []byte(testSampled)}, mode: ModeFull, traceID: testTraceID},
		{name: "the first key present counts", cfg: Config{Enable: true}, keys: []string{"x-trace", "traceparent"},
			payload: map[string][]byte{"x-trace": []byte("00-" + strings.Repeat("1", 32) + "-" + testParentID + "-01"), "traceparent": []byte(testSampled)},
			mode:    ModeFull, traceID: strings.Repeat("1", 32)},
		{name: "a key not configured is not read", cfg: Config{Enable: true}, keys: []string{"x-trace"}, payload: ctx, mode: ModeFull},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := New(Options{TraceContextKeys: tt.keys})
			defer mustClose(t, tr)
			c := newCaller(tr, testClient, testCoord)
			defer c.Close()
			prepare(t, c, 1)
			mustConfig(t, tr, tt.cfg)
			sent := exchange(t, c, 5, tt.payload, tt.comp)
			if tt.payload != nil {
				h := mustHeader(t, sent)
				var v cql.Frame
				v.Reset(h, sent, tt.comp)
				for k, want := range tt.payload {
					if got, _ := cql.PayloadValue(v.CustomPayload(), k); string(got) != string(want) {
						t.Errorf("forwarded payload %s = %q; want it untouched, %q", k, got, want)
					}
				}
			}
			got := tr.SlowLog(0)
			if len(got) != 1 {
				t.Fatalf("%d sessions; want 1", len(got))
			}
			s := got[0]
			wantParent := ""
			if tt.traceID != "" {
				wantParent = testParentID
			}
			if s.Mode != tt.mode || s.TraceID != tt.traceID || s.ParentSpanID != wantParent || s.TraceState != tt.state {
				t.Errorf("session mode %q trace_id %q parent_span_id %q trace_state %q; want %q %q %q %q",
					s.Mode, s.TraceID, s.ParentSpanID, s.TraceState, tt.mode, tt.traceID, wantParent, tt.state)
			}
		})
	}
}

func TestParentBasedSampling(t *testing.T) {
	sampled := map[string][]byte{"traceparent": []byte(testSampled)}
	unsampled := map[string][]byte{"traceparent": []byte("00-" + testTraceID + "-" + testParentID + "-00")}
	tests := []struct {
		name    string
		cfg     Config
		payload map[string][]byte
		mode    string // "" for no session
		flagged bool   // the forwarded request asks the node to trace
	}{
		{name: "sampled parent, follow on", cfg: Config{FollowClientSampling: true}, payload: sampled, mode: ModeParent, flagged: true},
		{name: "sampled parent, follow on, full below threshold", cfg: Config{Enable: true, ThresholdMicros: 1e12, FollowClientSampling: true}, payload: sampled, mode: ModeParent, flagged: true},
		{name: "sampled parent, follow on, fast below threshold", cfg: Config{Enable: true, Fast: true, ThresholdMicros: 1e12, FollowClientSampling: true}, payload: sampled, mode: ModeParent, flagged: true},
		{name: "unsampled parent, follow on", cfg: Config{FollowClientSampling: true}, payload: unsampled},
		{name: "no context, follow on", cfg: Config{FollowClientSampling: true}},
		{name: "sampled parent, follow off", cfg: Config{}, payload: sampled},
		{name: "unsampled parent, probability 1", cfg: Config{Probability: 1, FollowClientSampling: true}, payload: unsampled, mode: ModeSampled, flagged: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := &fakeNode{complete: 1, events: []Event{{Activity: "Parsing a statement", SourceElapsedUS: 3}}}
			tr := New(Options{NodeEvents: node})
			c := newCaller(tr, testClient, testCoord)
			defer c.Close()
			prepare(t, c, 1)
			mustConfig(t, tr, tt.cfg)
			sent := exchange(t, c, 5, tt.payload, nil)
			if got := sent[1]&cql.FlagTracing != 0; got != tt.flagged {
				t.Errorf("forwarded request has the tracing flag: %v; want %v", got, tt.flagged)
			}
			mustClose(t, tr)
			got := tr.SlowLog(0)
			if tt.mode == "" {
				if len(got) != 0 {
					t.Fatalf("%d sessions (%+v); want none", len(got), got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("%d sessions; want 1", len(got))
			}
			s := got[0]
			if s.Mode != tt.mode || s.TraceID != testTraceID || s.ID != cql.FormatUUID(nodeID) {
				t.Errorf("session mode %q trace_id %q id %s; want %q, %q and the node's session id", s.Mode, s.TraceID, s.ID, tt.mode, testTraceID)
			}
			if evs := fmt.Sprint(activities(s.Events)); !strings.Contains(evs, "node:Parsing a statement") {
				t.Errorf("events %s; want the node's", evs)
			}
		})
	}
}

func TestTraceContextInvalidCounted(t *testing.T) {
	tr := New(Options{})
	defer mustClose(t, tr)
	c := newCaller(tr, testClient, testCoord)
	defer c.Close()
	prepare(t, c, 1)
	mustConfig(t, tr, Config{Enable: true})
	want := map[string]uint64{}
	for i, tt := range invalidTraceparents {
		exchange(t, c, int16(10+i), map[string][]byte{"traceparent": []byte(tt.value)}, nil)
		want[tt.reason.String()]++
	}
	exchange(t, c, 100, map[string][]byte{"traceparent": []byte(testSampled), "tracestate": []byte("a=1,a=2")}, nil)
	want["tracestate"]++
	for _, s := range tr.SlowLog(0) {
		if s.TraceID != "" && s.ParentSpanID != testParentID {
			t.Errorf("session %s has trace id %q from a malformed context", s.ID, s.TraceID)
		}
	}
	got := tr.Stats().TraceContextInvalid
	for _, r := range InvalidReasons() {
		if got[r] != want[r] {
			t.Errorf("invalid[%s] = %d; want %d (all %v)", r, got[r], want[r], got)
		}
	}
}

func TestExemplarHook(t *testing.T) {
	type call struct {
		op cql.Opcode
		id string
	}
	calls := make(chan call, 10)
	tr := New(Options{Exemplar: func(op cql.Opcode, d time.Duration, id string) { calls <- call{op, id} }})
	defer mustClose(t, tr)
	c := newCaller(tr, testClient, testCoord)
	defer c.Close()
	prepare(t, c, 1)
	mustConfig(t, tr, Config{Enable: true})
	exchange(t, c, 5, nil, nil)
	exchange(t, c, 6, map[string][]byte{"traceparent": []byte(testSampled)}, nil)
	close(calls)
	var got []call
	for c := range calls {
		got = append(got, c)
	}
	if len(got) != 1 || got[0].op != cql.OpExecute || got[0].id != testTraceID {
		t.Errorf("exemplar calls %v; want one, EXECUTE %s (the session without a context has none)", got, testTraceID)
	}
}

// BenchmarkReadContext is the parse of a request's custom payload with a traceparent and a
// tracestate: what a request with a context costs tracing beyond one without.
func BenchmarkReadContext(b *testing.B) {
	tr := New(Options{})
	defer mustClose(b, tr)
	h, f := payloadRequest(b, 5, map[string][]byte{
		"traceparent": []byte(testSampled), "tracestate": []byte("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"),
	}, nil)
	var v cql.Frame
	b.ReportAllocs()
	for b.Loop() {
		v.Reset(h, f, nil)
		if tc := tr.readContext(v.CustomPayload()); !tc.Sampled() {
			b.Fatal("no context read")
		}
	}
}

// BenchmarkFullWithContext is full mode below the threshold for requests that carry a
// sampled trace context: BenchmarkFull plus the context's parse and copy. It must be 0
// allocs/op.
func BenchmarkFullWithContext(b *testing.B) {
	benchContext(b, Config{Enable: true, ThresholdMicros: 1e12})
}

// BenchmarkFastWithContext is fast mode below the threshold with a context. It must be 0
// allocs/op.
func BenchmarkFastWithContext(b *testing.B) {
	benchContext(b, Config{Enable: true, Fast: true, ThresholdMicros: 1e12})
}

func benchContext(b *testing.B, cfg Config) {
	tr := New(Options{})
	defer mustClose(b, tr)
	k := newCaller(tr, testClient, testCoord)
	defer k.Close()
	prepare(b, k, 1)
	mustConfig(b, tr, cfg)
	c := k.Conn
	h, f := payloadRequest(b, 5, map[string][]byte{"traceparent": []byte(testSampled), "tracestate": []byte("rojo=00f067aa0ba902b7")}, nil)
	_, _, rh, rf := benchFrames(b)
	var rq, rs cql.Frame
	one := func() {
		rq.Reset(h, f, nil)
		t := c.Begin(&rq, 0)
		if t.Events() {
			t.Sent(Now())
		}
		rs.Reset(rh, rf, nil)
		_, t = c.End(t, &rs, 0)
		c.Done(t, 0)
	}
	one()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		one()
	}
}

// TestOTelSpanContinuesTrace checks the span of a session with a trace context: the
// caller's trace id, the caller's span as its remote parent, the tracestate kept; and a
// session without one is a root span of a trace of its own.
func TestOTelSpanContinuesTrace(t *testing.T) {
	exp := keptExporter{tracetest.NewInMemoryExporter()}
	sink, err := NewOTelSink(context.Background(), OTelOptions{Exporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	tr := New(Options{Sinks: []Sink{sink}})
	c := newCaller(tr, testClient, testCoord)
	prepare(t, c, 1)
	mustConfig(t, tr, Config{Enable: true})
	exchange(t, c, 5, map[string][]byte{"traceparent": []byte(testSampled), "tracestate": []byte("rojo=00f067aa0ba902b7, congo=t61rcWkgMzE")}, nil)
	exchange(t, c, 6, nil, nil)
	c.Close()
	mustClose(t, tr)

	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans; want 2", len(spans))
	}
	var child, root tracetest.SpanStub
	for _, sp := range spans {
		if sp.Parent.IsValid() {
			child = sp
		} else {
			root = sp
		}
	}
	if got := child.SpanContext.TraceID().String(); got != testTraceID {
		t.Errorf("span trace id %s; want the caller's %s", got, testTraceID)
	}
	if got := child.Parent.SpanID().String(); got != testParentID || !child.Parent.IsRemote() || !child.Parent.IsSampled() {
		t.Errorf("span parent %s remote %v sampled %v; want the caller's span %s, remote, sampled", got, child.Parent.IsRemote(), child.Parent.IsSampled(), testParentID)
	}
	if got := child.SpanContext.TraceState().String(); got != "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE" {
		t.Errorf("span tracestate %q; want the caller's", got)
	}
	if !root.SpanContext.IsValid() || root.SpanContext.TraceID().String() == testTraceID {
		t.Errorf("the session without a context: span %v; want a root of its own trace", root.SpanContext)
	}
}
