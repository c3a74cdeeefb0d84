package sidecar

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/internal/testkit/drivertest"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/cqlsink"
)

// tracedStack is an embedded node, a tracer and a sidecar in front of the node.
type tracedStack struct {
	node  *runningNode
	proxy *testProxy
	tr    *tracing.Tracer
}

// mustTracedStack starts a node and a sidecar with a tracer built from opts; direct, when
// not nil, gets a gocql session straight to the node (for NodeEvents) before the tracer is
// made.
func mustTracedStack(tb testing.TB, opts tracing.Options, cfg tracing.Config, direct func(*gocql.Session) tracing.Options) *tracedStack {
	tb.Helper()
	n := mustNode(tb, node.Config{}, nodeAddr)
	if direct != nil {
		ap := mustAddrPort(n.addr)
		s, err := drivertest.Cluster(drivertest.Options{Host: ap.Addr().String(), Port: int(ap.Port())}).CreateSession()
		if err != nil {
			tb.Fatalf("direct session to the node: %v", err)
		}
		tb.Cleanup(s.Close)
		extra := direct(s)
		opts.NodeEvents = extra.NodeEvents
	}
	tr := tracing.New(opts)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		tr.Close(ctx)
	})
	if err := tr.SetConfig(cfg); err != nil {
		tb.Fatal(err)
	}
	tp := mustProxyApart(tb, Config{}, tr, n)
	return &tracedStack{node: n, proxy: tp, tr: tr}
}

// session opens a gocql session through the sidecar, with the driver's defaults.
func (st *tracedStack) session(tb testing.TB, comp string) *gocql.Session {
	tb.Helper()
	s, err := drivertest.Cluster(sidecarOptions(st.proxy, comp)).CreateSession()
	if err != nil {
		tb.Fatalf("gocql through the sidecar: %v", err)
	}
	tb.Cleanup(s.Close)
	return s
}

// workload creates a table and runs a prepared insert of secret and a prepared select.
func workload(tb testing.TB, s *gocql.Session, ks, secret string) {
	tb.Helper()
	for _, stmt := range []string{
		"CREATE KEYSPACE IF NOT EXISTS " + ks + " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
		"CREATE TABLE IF NOT EXISTS " + ks + ".kv (k int PRIMARY KEY, v text)",
	} {
		if err := s.Query(stmt).Exec(); err != nil {
			tb.Fatalf("%s: %v", stmt, err)
		}
	}
	if err := s.Query("INSERT INTO "+ks+".kv (k, v) VALUES (?, ?)", 1, secret).Consistency(gocql.LocalOne).Exec(); err != nil {
		tb.Fatalf("insert: %v", err)
	}
	var v string
	if err := s.Query("SELECT v FROM "+ks+".kv WHERE k = ?", 1).Consistency(gocql.LocalOne).Scan(&v); err != nil || v != secret {
		tb.Fatalf("select: %q, %v; want %q", v, err, secret)
	}
}

// findSession waits until the slow log holds a session that match accepts, and returns it.
func findSession(tb testing.TB, tr *tracing.Tracer, what string, match func(tracing.Session) bool) tracing.Session {
	tb.Helper()
	var found tracing.Session
	waitFor(tb, what, func() bool {
		for _, s := range tr.SlowLog(0) {
			if match(s) {
				found = s
				return true
			}
		}
		return false
	})
	return found
}

func queryIs(q string) func(tracing.Session) bool {
	return func(s tracing.Session) bool { return s.Parameters["query"] == q }
}

// checkRedacted fails if secret appears in any parameter of any recorded session.
func checkRedacted(tb testing.TB, tr *tracing.Tracer, secret string) {
	tb.Helper()
	hexSecret := hex.EncodeToString([]byte(secret))
	for _, s := range tr.SlowLog(0) {
		for k, v := range s.Parameters {
			if strings.Contains(v, secret) || strings.Contains(v, hexSecret) {
				tb.Errorf("session %s parameter %s = %q shows a bound value; want it redacted", s.ID, k, v)
			}
		}
	}
}

func activities(s tracing.Session, source string) []string {
	var out []string
	for _, e := range s.Events {
		if e.Source == source {
			out = append(out, e.Activity)
		}
	}
	return out
}

func TestE2ETracingFast(t *testing.T) {
	for _, comp := range []string{"none", "lz4", "snappy"} {
		t.Run(comp, func(t *testing.T) {
			st := mustTracedStack(t, tracing.Options{}, tracing.Config{Enable: true, Fast: true, ThresholdMicros: 0, TTLSeconds: 60}, nil)
			const secret = "secret-value-fast"
			workload(t, st.session(t, comp), "fast_"+comp, secret)

			ins := findSession(t, st.tr, "the insert's session", queryIs("INSERT INTO fast_"+comp+".kv (k, v) VALUES (?, ?)"))
			if ins.Mode != tracing.ModeFast || ins.Command != "EXECUTE" {
				t.Errorf("insert session mode %q command %q; want fast EXECUTE", ins.Mode, ins.Command)
			}
			if got := ins.Parameters["consistency_level"]; got != "LOCAL_ONE" {
				t.Errorf("consistency_level = %q; want LOCAL_ONE", got)
			}
			if len(ins.Events) != 0 {
				t.Errorf("fast session has events %v; want none", ins.Events)
			}
			if ins.DurationUS < 0 || ins.StartedAt.IsZero() {
				t.Errorf("duration %d µs, started %v; want a duration and a start", ins.DurationUS, ins.StartedAt)
			}
			if !strings.HasPrefix(ins.Parameters["param[1]"], "<redacted") {
				t.Errorf("param[1] = %q; want it redacted", ins.Parameters["param[1]"])
			}
			findSession(t, st.tr, "the select's session", queryIs("SELECT v FROM fast_"+comp+".kv WHERE k = ?"))
			checkRedacted(t, st.tr, secret)
		})
	}
}

func TestE2ETracingFull(t *testing.T) {
	st := mustTracedStack(t, tracing.Options{}, tracing.Config{Enable: true, ThresholdMicros: 0, TTLSeconds: 60}, nil)
	const secret = "secret-value-full"
	workload(t, st.session(t, "lz4"), "fullmode", secret)
	s := findSession(t, st.tr, "the select's session", queryIs("SELECT v FROM fullmode.kv WHERE k = ?"))
	if s.Mode != tracing.ModeFull {
		t.Errorf("mode %q; want full", s.Mode)
	}
	want := []string{tracing.EventReceived, tracing.EventParsed, tracing.EventSentToNode, tracing.EventNodeResponded, tracing.EventResponseSent}
	got := activities(s, tracing.SourceSidecar)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("sidecar events %q; want %q in that order", got, want)
	}
	for i := 1; i < len(s.Events); i++ {
		if s.Events[i].SourceElapsedUS < s.Events[i-1].SourceElapsedUS {
			t.Errorf("events out of time order: %+v", s.Events)
		}
	}
	checkRedacted(t, st.tr, secret)
}

func TestE2ETracingSampled(t *testing.T) {
	st := mustTracedStack(t, tracing.Options{}, tracing.Config{Probability: 1, ThresholdMicros: tracing.DefaultThresholdMicros, TTLSeconds: 60},
		func(s *gocql.Session) tracing.Options { return tracing.Options{NodeEvents: cqlsink.NewNodeEvents(s)} })
	const secret = "secret-value-sampled"
	workload(t, st.session(t, "snappy"), "sampled", secret)

	s := findSession(t, st.tr, "the select's session with node events", func(s tracing.Session) bool {
		return s.Parameters["query"] == "SELECT v FROM sampled.kv WHERE k = ?" && len(activities(s, tracing.SourceNode)) > 0
	})
	if s.Mode != tracing.ModeSampled {
		t.Errorf("mode %q; want sampled", s.Mode)
	}
	if len(activities(s, tracing.SourceSidecar)) < 5 {
		t.Errorf("sidecar events %q; want all five", activities(s, tracing.SourceSidecar))
	}
	checkRedacted(t, st.tr, secret)

	// A client that did not ask for tracing gets no tracing flag and no tracing id.
	tests := []struct {
		name  string
		flags byte
	}{
		{"not asked", 0},
		{"asked", cql.FlagTracing},
	}
	c := mustDial(t, st.proxy.addr)
	c.send(frame(cql.V4, 0, 0, cql.OpStartup, cql.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0"}}.AppendBody(nil, cql.V4)))
	if h, _ := c.recv(); h.Opcode != cql.OpReady {
		t.Fatalf("STARTUP got %s; want READY", h.Opcode)
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.send(frame(cql.V4, tt.flags, int16(i+1), cql.OpQuery, queryBody("SELECT release_version FROM system.local")))
			h, body := c.recv()
			if got, want := h.Flags&cql.FlagTracing, tt.flags; got != want {
				t.Errorf("response tracing flag 0x%02x; want 0x%02x", got, want)
			}
			if h.Length != uint32(len(body)) {
				t.Errorf("header length %d; body %d bytes", h.Length, len(body))
			}
			_, rest, err := cql.ParseResponsePrefix(h.Flags, body)
			if err != nil {
				t.Fatal(err)
			}
			msg, err := cql.DecodeResult(rest, cql.V4)
			if err != nil {
				t.Fatalf("decode the response: %v", err)
			}
			if rows := msg.(cql.RowsResult).Rows; len(rows) != 1 || !bytes.HasPrefix(rows[0][0], []byte("4.")) {
				t.Errorf("rows %q; want one release version", rows)
			}
		})
	}
}

// TestE2ESampledNodeQueries checks what the node is asked for the traces of sampled
// requests: a few queries for many sessions, not two per session, and every session still
// gets the node's events. The queries are the node's requests that did not come through
// the sidecar.
func TestE2ESampledNodeQueries(t *testing.T) {
	st := mustTracedStack(t, tracing.Options{}, tracing.Config{Probability: 1, ThresholdMicros: tracing.DefaultThresholdMicros, TTLSeconds: 60},
		func(s *gocql.Session) tracing.Options { return tracing.Options{NodeEvents: cqlsink.NewNodeEvents(s)} })
	s := st.session(t, "none")
	workload(t, s, "fetches", "x") // the schema, and the fetcher's statements prepared
	quiet := func() (node, proxy uint64) {
		waitFor(t, "every traced session recorded", func() bool {
			ss := st.tr.Stats()
			return ss.Traced == ss.SlowSessions
		})
		return st.node.srv.Requests(), st.tr.Stats().Requests
	}
	node0, proxy0 := quiet()

	const n = 300
	errs := make(chan error, n)
	for i := range n {
		go func() {
			var v string
			errs <- s.Query("SELECT v FROM fetches.kv WHERE k = ?", 1).Consistency(gocql.LocalOne).Scan(&v)
		}()
		if i%30 == 29 {
			time.Sleep(10 * time.Millisecond) // spread over a few of the fetcher's ticks
		}
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("select: %v", err)
		}
	}
	node1, proxy1 := quiet()

	fetches := (node1 - node0) - (proxy1 - proxy0)
	t.Logf("%d sampled requests, %d node queries for their traces", n, fetches)
	if fetches > n/10 {
		t.Errorf("the node got %d queries for the traces of %d sampled requests; want a few per batch of sessions, not per session", fetches, n)
	}
	withEvents := 0
	for _, sess := range st.tr.SlowLog(0) {
		if sess.Parameters["query"] == "SELECT v FROM fetches.kv WHERE k = ?" {
			if len(activities(sess, tracing.SourceNode)) == 0 {
				t.Errorf("session %s has no node events: %v", sess.ID, sess.Events)
			}
			withEvents++
		}
	}
	if withEvents < n {
		t.Errorf("%d sessions of the select recorded; want at least %d", withEvents, n)
	}
}

func TestE2EClientTracing(t *testing.T) {
	st := mustTracedStack(t, tracing.Options{}, tracing.DefaultConfig(), nil) // tracing off
	s := st.session(t, "none")
	workload(t, s, "client", "x")
	var out bytes.Buffer
	tracer := gocql.NewTraceWriter(s, &out)
	var v string
	if err := s.Query("SELECT v FROM client.kv WHERE k = ?", 1).Trace(tracer).Scan(&v); err != nil {
		t.Fatalf("traced select: %v", err)
	}
	if txt := out.String(); !strings.Contains(txt, "Tracing session") {
		t.Errorf("gocql got no trace from the node through the sidecar:\n%s", txt)
	}
	sess := findSession(t, st.tr, "the client-traced session", queryIs("SELECT v FROM client.kv WHERE k = ?"))
	if sess.Mode != tracing.ModeClient {
		t.Errorf("mode %q; want client", sess.Mode)
	}
}

func TestE2EBindValuesOptIn(t *testing.T) {
	st := mustTracedStack(t, tracing.Options{BindValues: true}, tracing.Config{Enable: true, Fast: true, TTLSeconds: 60}, nil)
	const secret = "visible-value"
	workload(t, st.session(t, "none"), "bind", secret)
	s := findSession(t, st.tr, "the insert's session", queryIs("INSERT INTO bind.kv (k, v) VALUES (?, ?)"))
	if got, want := s.Parameters["param[1]"], "0x"+hex.EncodeToString([]byte(secret)); got != want {
		t.Errorf("param[1] = %q; want %q", got, want)
	}
}

// keptExporter keeps its spans when the provider shuts it down.
type keptExporter struct{ *tracetest.InMemoryExporter }

func (keptExporter) Shutdown(context.Context) error { return nil }

var _ sdktrace.SpanExporter = keptExporter{}

func TestE2EOTelSpans(t *testing.T) {
	exp := keptExporter{tracetest.NewInMemoryExporter()}
	sink, err := tracing.NewOTelSink(context.Background(), tracing.OTelOptions{Exporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	st := mustTracedStack(t, tracing.Options{Sinks: []tracing.Sink{sink}}, tracing.Config{Enable: true, ThresholdMicros: 0, TTLSeconds: 60}, nil)
	workload(t, st.session(t, "none"), "otel", "x")
	findSession(t, st.tr, "the select's session", queryIs("SELECT v FROM otel.kv WHERE k = ?"))
	var span tracetest.SpanStub
	waitFor(t, "the select's span", func() bool {
		sink.ForceFlush(context.Background())
		for _, s := range exp.GetSpans() {
			for _, a := range s.Attributes {
				if a.Value.AsString() == "SELECT v FROM otel.kv WHERE k = ?" {
					span = s
					return true
				}
			}
		}
		return false
	})
	if len(span.Events) < 5 {
		t.Errorf("span has %d events; want the 5 sidecar events", len(span.Events))
	}
	if !span.EndTime.After(span.StartTime) && !span.EndTime.Equal(span.StartTime) {
		t.Errorf("span ends %v before it starts %v", span.EndTime, span.StartTime)
	}
}

// TestE2ETracingFastEveryRequest checks fast mode with threshold 0 on every request: each
// statement the test sends has exactly one session, every other session is one of the
// driver's own queries on system tables, the sessions add up to the CQL requests the sidecar
// forwarded, and every duration lies between 0 and the latency the client saw.
func TestE2ETracingFastEveryRequest(t *testing.T) {
	for _, comp := range []string{"none", "lz4", "snappy"} {
		t.Run(comp, func(t *testing.T) {
			// Literals are kept, so that each session's text names its statement exactly
			// (redaction is tested by TestE2ESecretsRedacted).
			st := mustTracedStack(t, tracing.Options{RingSize: 1 << 14, QueryLiterals: true}, tracing.Config{Enable: true, Fast: true, ThresholdMicros: 0, TTLSeconds: 60}, nil)
			s := st.session(t, comp)
			ks := "every_" + comp
			// Statements without bind values go as QUERY with their own text, so that each
			// session names its statement.
			stmts := []string{
				"CREATE KEYSPACE " + ks + " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
				"CREATE TABLE " + ks + ".kv (k int PRIMARY KEY, v text)",
			}
			for i := range 100 {
				stmts = append(stmts,
					fmt.Sprintf("INSERT INTO %s.kv (k, v) VALUES (%d, 'v%d')", ks, i, i),
					fmt.Sprintf("SELECT v FROM %s.kv WHERE k = %d", ks, i))
			}
			latency := make(map[string]time.Duration, len(stmts))
			for _, stmt := range stmts {
				start := time.Now()
				if err := s.Query(stmt).Exec(); err != nil {
					t.Fatalf("%s: %v", stmt, err)
				}
				latency[stmt] = time.Since(start)
			}
			s.Close() // no request after this, the driver's own included

			traceable := func() uint64 {
				r := st.proxy.Stats().Requests
				return r[cql.OpQuery] + r[cql.OpExecute] + r[cql.OpBatch] + r[cql.OpPrepare]
			}
			waitFor(t, "a session for every CQL request forwarded", func() bool {
				return uint64(len(st.tr.SlowLog(0))) >= traceable()
			})
			sessions := st.tr.SlowLog(0)
			if got, want := uint64(len(sessions)), traceable(); got != want {
				t.Errorf("%d sessions recorded; want %d, one per QUERY, EXECUTE, BATCH and PREPARE forwarded", got, want)
			}

			seen := make(map[string][]string, len(stmts)) // the commands of each statement's sessions
			control := 0
			for _, sess := range sessions {
				q := sess.Parameters["query"]
				lat, ours := latency[q]
				if !ours {
					// The driver's own: connection setup, topology and schema queries.
					if !strings.Contains(q, "system") {
						t.Errorf("session %s (%s %q) is neither a statement of the test nor a driver query on a system table", sess.ID, sess.Command, q)
					}
					control++
					continue
				}
				seen[q] = append(seen[q], sess.Command)
				if sess.Mode != tracing.ModeFast {
					t.Errorf("%q: mode %q; want fast", q, sess.Mode)
				}
				// The sidecar's interval lies inside the client's; +1 µs for rounding.
				if sess.DurationUS < 0 || sess.DurationUS > lat.Microseconds()+1 {
					t.Errorf("%q %s: duration %d µs; want between 0 and the client's latency, %d µs", q, sess.Command, sess.DurationUS, lat.Microseconds())
				}
			}
			for _, stmt := range stmts {
				// gocql sends DDL as a QUERY, and prepares DML (with or without values) once,
				// then executes it.
				want := "PREPARE,EXECUTE"
				if strings.HasPrefix(stmt, "CREATE") {
					want = "QUERY"
				}
				got := seen[stmt]
				slices.Sort(got)
				wantSorted := strings.Split(want, ",")
				slices.Sort(wantSorted)
				if !slices.Equal(got, wantSorted) {
					t.Errorf("%q has sessions %v; want exactly one of each of %s", stmt, got, want)
				}
			}
			if control == 0 {
				t.Errorf("no session for the driver's own queries; want its system.local and peers queries recorded too")
			}
			t.Logf("%d statements, %d driver queries, %d sessions", len(stmts), control, len(sessions))
		})
	}
}

// TestE2EPreparedWhileOff prepares statements with tracing off, through lz4, then turns
// fast mode on: the EXECUTEs that follow (gocql keeps its prepared ids) carry the query
// text, which only the sidecar's learning of every PREPARE gives. It also checks that
// the tracer counts requests from the proxy's one counter.
func TestE2EPreparedWhileOff(t *testing.T) {
	st := mustTracedStack(t, tracing.Options{}, tracing.DefaultConfig(), nil)
	s := st.session(t, "lz4")
	workload(t, s, "prepoff", "v-off")
	if n := len(st.tr.SlowLog(0)); n != 0 {
		t.Fatalf("%d sessions with tracing off; want 0", n)
	}
	if err := st.tr.SetConfig(tracing.Config{Enable: true, Fast: true, ThresholdMicros: 0, TTLSeconds: 60}); err != nil {
		t.Fatal(err)
	}
	if err := s.Query("INSERT INTO prepoff.kv (k, v) VALUES (?, ?)", 2, "v-on").Exec(); err != nil {
		t.Fatal(err)
	}
	ins := findSession(t, st.tr, "the insert's session", queryIs("INSERT INTO prepoff.kv (k, v) VALUES (?, ?)"))
	if ins.Command != "EXECUTE" {
		t.Errorf("command %q; want EXECUTE of the statement prepared while tracing was off", ins.Command)
	}
	got, want := st.tr.Stats().Requests, st.proxy.Stats().TotalRequests()
	if got == 0 || got != want {
		t.Errorf("tracer counts %d requests; want the proxy's %d", got, want)
	}
}
