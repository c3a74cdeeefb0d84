package cqlsink

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/tracing"
)

// mustNode starts an embedded node on 127.0.0.1:0 and returns it with a gocql session.
func mustNode(tb testing.TB) (*node.Server, *gocql.Session) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := node.New(node.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	ap := netip.MustParseAddrPort(ln.Addr().String())
	cluster := gocql.NewCluster(ap.Addr().String())
	cluster.Port = int(ap.Port())
	cluster.ProtoVersion = 4
	cluster.Timeout = 5 * time.Second
	cluster.DisableInitialHostLookup = true
	s, err := cluster.CreateSession()
	if err != nil {
		cancel()
		tb.Fatalf("gocql session: %v", err)
	}
	tb.Cleanup(func() {
		s.Close()
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("Serve: %v", err)
		}
	})
	return srv, s
}

func TestNodeEvents(t *testing.T) {
	srv, s := mustNode(t)
	ne := NewNodeEvents(s)
	ctx := context.Background()
	done := cql.NewTimeUUID(time.Now())
	parsedAt := time.Date(2026, 3, 4, 5, 6, 7, 1200, time.UTC)
	partial := cql.NewTimeUUID(time.Now())
	missing := cql.NewTimeUUID(time.Now())
	srv.Engine().WriteTrace(node.TraceSession{
		ID: done, Client: netip.MustParseAddr("127.0.0.1"), Coordinator: netip.MustParseAddr("127.0.0.1"),
		Duration: 300 * time.Microsecond, Request: "Execute CQL3 query", StartedAt: time.Now(),
		Events: []node.TraceEvent{
			{ID: [16]byte(gocql.UUIDFromTime(parsedAt)), Activity: "Parsing a statement", SourceElapsed: 5 * time.Microsecond},
			{ID: cql.NewTimeUUID(time.Now()), Activity: "Processing a statement", SourceElapsed: 40 * time.Microsecond},
		},
	})
	// A session the node is still writing: an event, and no duration yet.
	if err := s.Query(`INSERT INTO system_traces.sessions (session_id, request) VALUES (?, ?)`,
		gocql.UUID(partial), "Execute CQL3 query").Exec(); err != nil {
		t.Fatalf("insert partial session: %v", err)
	}
	if err := s.Query(`INSERT INTO system_traces.events (session_id, event_id, activity, source_elapsed) VALUES (?, ?, ?, ?)`,
		gocql.UUID(partial), gocql.TimeUUID(), "Parsing another", 7).Exec(); err != nil {
		t.Fatalf("insert partial event: %v", err)
	}

	// One call asks about all of them, the finished one twice.
	ids := [][16]byte{done, partial, missing, done}
	fin, err := ne.Finished(ctx, ids)
	if err != nil {
		t.Fatalf("Finished: %v", err)
	}
	if got, want := fmt.Sprint(fin), "[true false false true]"; got != want {
		t.Errorf("Finished = %s; want %s", got, want)
	}
	evs, err := ne.Events(ctx, ids)
	if err != nil {
		t.Fatalf("Events: %v", err)
	}
	if len(evs) != len(ids) {
		t.Fatalf("Events returned %d lists; want %d", len(evs), len(ids))
	}
	for _, e := range evs[0] {
		if e.Activity == "Parsing a statement" && !e.Time.Equal(parsedAt) {
			t.Errorf("event %q at %v; want %v, the time in its event_id", e.Activity, e.Time, parsedAt)
		}
	}
	tests := []struct {
		name string
		i    int
		want string
	}{
		{name: "finished", i: 0, want: "[Parsing a statement/node/5 Processing a statement/node/40]"},
		{name: "still writing", i: 1, want: "[Parsing another/node/7]"},
		{name: "not written yet", i: 2, want: "[]"},
		{name: "asked twice", i: 3, want: "[Parsing a statement/node/5 Processing a statement/node/40]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := make([]string, 0, len(evs[tt.i]))
			for _, e := range evs[tt.i] {
				got = append(got, fmt.Sprintf("%s/%s/%d", e.Activity, e.Source, e.SourceElapsedUS))
			}
			if fmt.Sprint(got) != tt.want {
				t.Errorf("events = %v; want %s", got, tt.want)
			}
		})
	}
}

// TestNodeEventsOneQueryPerCall checks that Finished and Events ask the node once for a
// whole batch of sessions: the node receives one request per call, whatever the number of
// sessions (gocql prepares each statement once, on the first call).
func TestNodeEventsOneQueryPerCall(t *testing.T) {
	srv, s := mustNode(t)
	ne := NewNodeEvents(s)
	ctx := context.Background()
	ids := make([][16]byte, tracing.MaxNodeEventBatch)
	for i := range ids {
		ids[i] = cql.NewTimeUUID(time.Now())
		srv.Engine().WriteTrace(node.TraceSession{
			ID: ids[i], Client: netip.MustParseAddr("127.0.0.1"), Coordinator: netip.MustParseAddr("127.0.0.1"),
			Duration: time.Millisecond, StartedAt: time.Now(),
			Events: []node.TraceEvent{{ID: cql.NewTimeUUID(time.Now()), Activity: "Parsing a statement"}},
		})
	}
	// The first calls prepare the statements.
	if _, err := ne.Finished(ctx, ids[:1]); err != nil {
		t.Fatalf("Finished: %v", err)
	}
	if _, err := ne.Events(ctx, ids[:1]); err != nil {
		t.Fatalf("Events: %v", err)
	}
	before := srv.Requests()
	fin, err := ne.Finished(ctx, ids)
	if err != nil {
		t.Fatalf("Finished: %v", err)
	}
	evs, err := ne.Events(ctx, ids)
	if err != nil {
		t.Fatalf("Events: %v", err)
	}
	if got := srv.Requests() - before; got != 2 {
		t.Errorf("the node got %d requests for %d sessions; want 2, one per call", got, len(ids))
	}
	for i := range ids {
		if !fin[i] || len(evs[i]) != 1 {
			t.Fatalf("session %d: finished %v, %d events; want finished, 1 event", i, fin[i], len(evs[i]))
		}
	}
}

func TestTableSink(t *testing.T) {
	_, s := mustNode(t)
	sink := NewTableSink(s, func() int64 { return 3600 })
	sink.Replication = "{'class': 'SimpleStrategy', 'replication_factor': 1}"
	ctx := context.Background()
	started := time.Date(2026, 3, 4, 5, 6, 7, 890000000, time.UTC)
	slow := &tracing.Session{
		ID: cql.FormatUUID(cql.NewTimeUUID(started)), StartedAt: started, DurationUS: 1234,
		Client: "127.0.0.1:50123", Coordinator: "127.0.0.2:9042", Command: "EXECUTE",
		Request: tracing.RequestExecute, Mode: tracing.ModeFull, Username: "alice",
		Parameters: map[string]string{"query": "SELECT * FROM ks.t WHERE k = ?", "consistency_level": "ONE"},
		Events: []tracing.Event{
			{Activity: tracing.EventReceived, Source: tracing.SourceSidecar},
			{Activity: tracing.EventSentToNode, Source: tracing.SourceSidecar, SourceElapsedUS: 10},
			{Activity: "Parsing a statement", Source: tracing.SourceNode, SourceElapsedUS: 3},
		},
		Error:   "read timeout (0x1200): timed out",
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", ParentSpanID: "00f067aa0ba902b7",
	}
	sampled := &tracing.Session{
		ID: cql.FormatUUID(cql.NewTimeUUID(started)), StartedAt: started, DurationUS: 5,
		Client: "127.0.0.1:50123", Coordinator: "127.0.0.2:9042", Command: "QUERY",
		Request: tracing.RequestQuery, Mode: tracing.ModeSampled, Parameters: map[string]string{"query": "SELECT 1"},
	}
	for _, sess := range []*tracing.Session{slow, sampled} {
		if err := sink.Write(ctx, sess); err != nil {
			t.Fatalf("Write(%s): %v", sess.Mode, err)
		}
	}

	var (
		command, request string
		client, coord    net.IP
		duration         int
		params           map[string]string
		at               time.Time
	)
	id := gocql.UUID(must(cql.ParseUUID(slow.ID)))
	if err := s.Query(`SELECT command, request, client, coordinator, duration, parameters, started_at
		FROM tracecar_traces.sessions WHERE session_id = ?`, id).Scan(&command, &request, &client, &coord, &duration, &params, &at); err != nil {
		t.Fatalf("read session: %v", err)
	}
	if command != "EXECUTE" || request != tracing.RequestExecute || client.String() != "127.0.0.1" ||
		coord.String() != "127.0.0.2" || duration != 1234 || !at.Equal(started) {
		t.Errorf("session row = %q %q %v %v %d %v", command, request, client, coord, duration, at)
	}
	if params["mode"] != "full" || params["error"] != slow.Error || params["consistency_level"] != "ONE" {
		t.Errorf("parameters = %v; want mode, error and consistency", params)
	}

	for _, table := range []string{"sessions", "node_slow_log"} {
		var user string
		if err := s.Query(`SELECT username FROM tracecar_traces.`+table+` WHERE session_id = ? ALLOW FILTERING`, id).Scan(&user); err != nil {
			t.Fatalf("read %s username: %v", table, err)
		}
		if user != "alice" {
			t.Errorf("%s username = %q; want the connection's, alice", table, user)
		}
	}

	for _, table := range []string{"sessions", "node_slow_log"} {
		var traceID, parentID string
		if err := s.Query(`SELECT trace_id, parent_span_id FROM tracecar_traces.`+table+` WHERE session_id = ? ALLOW FILTERING`, id).Scan(&traceID, &parentID); err != nil {
			t.Fatalf("read %s trace context: %v", table, err)
		}
		if traceID != slow.TraceID || parentID != slow.ParentSpanID {
			t.Errorf("%s trace_id %q parent_span_id %q; want the session's, %q %q", table, traceID, parentID, slow.TraceID, slow.ParentSpanID)
		}
	}
	var noTrace *string
	if err := s.Query(`SELECT trace_id FROM tracecar_traces.sessions WHERE session_id = ?`,
		gocql.UUID(must(cql.ParseUUID(sampled.ID)))).Scan(&noTrace); err != nil {
		t.Fatalf("read the sampled session's trace_id: %v", err)
	}
	if noTrace != nil {
		t.Errorf("trace_id of a session without a trace context = %q; want null", *noTrace)
	}

	var ttl int
	if err := s.Query(`SELECT TTL(request) FROM tracecar_traces.sessions WHERE session_id = ?`, id).Scan(&ttl); err != nil {
		t.Fatalf("read TTL: %v", err)
	}
	if ttl <= 0 || ttl > 3600 {
		t.Errorf("TTL(request) = %d; want in (0, 3600]", ttl)
	}

	iter := s.Query(`SELECT activity, source_elapsed, thread FROM tracecar_traces.events WHERE session_id = ?`, id).Iter()
	var got []string
	var activity, thread string
	var elapsed int
	for iter.Scan(&activity, &elapsed, &thread) {
		got = append(got, fmt.Sprintf("%s:%s:%d", thread, activity, elapsed))
	}
	if err := iter.Close(); err != nil {
		t.Fatal(err)
	}
	if want := "[sidecar:request received:0 sidecar:sent to node:10 node:Parsing a statement:3]"; fmt.Sprint(got) != want {
		t.Errorf("events = %v; want %s", got, want)
	}

	tests := []struct {
		name, query string
		want        int
	}{
		{"slow log has the full session", `SELECT session_id FROM tracecar_traces.node_slow_log`, 1},
		{"time index has the full session", `SELECT session_id FROM tracecar_traces.node_slow_log_time_idx WHERE minute = '2026-03-04 05:06:00+0000'`, 1},
		{"both sessions", `SELECT session_id FROM tracecar_traces.sessions`, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := 0
			var sid gocql.UUID
			iter := s.Query(tt.query).Iter()
			for iter.Scan(&sid) {
				n++
			}
			if err := iter.Close(); err != nil {
				t.Fatal(err)
			}
			if n != tt.want {
				t.Errorf("%d rows; want %d", n, tt.want)
			}
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
