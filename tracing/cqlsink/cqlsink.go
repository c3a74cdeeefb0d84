// Package cqlsink connects the tracing engine to a CQL cluster through gocql: NodeEvents
// reads a node's own trace from system_traces, and TableSink persists sessions into the
// keyspace tracecar_traces, with ScyllaDB's system_traces schema, so that every node of
// the cluster can query every sidecar's slow-query records.
//
// Both must use a gocql session connected to the nodes directly, never through a sidecar:
// with trace probability 1, a sidecar would trace their own queries, and fetch those
// traces, without end.
package cqlsink

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/gocql/gocql"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/tracing"
)

// NodeEvents is a tracing.NodeEventSource reading system_traces.sessions and
// system_traces.events, many sessions in one query (session_id IN ?). A session is
// finished once the node has written its duration, which Cassandra and ScyllaDB do last.
// It is safe for concurrent use, as gocql is.
type NodeEvents struct {
	s *gocql.Session
}

// NewNodeEvents returns a NodeEvents querying through s.
func NewNodeEvents(s *gocql.Session) *NodeEvents { return &NodeEvents{s: s} }

// uuids returns ids as gocql binds a list<uuid>, and their positions by id.
func uuids(ids [][16]byte) ([]gocql.UUID, map[gocql.UUID][]int) {
	list := make([]gocql.UUID, len(ids))
	at := make(map[gocql.UUID][]int, len(ids))
	for i, id := range ids {
		list[i] = gocql.UUID(id)
		at[list[i]] = append(at[list[i]], i)
	}
	return list, at
}

// Finished reports, for each of ids, whether the node has written the session's duration,
// in one query.
func (n *NodeEvents) Finished(ctx context.Context, ids [][16]byte) ([]bool, error) {
	list, at := uuids(ids)
	done := make([]bool, len(ids))
	iter := n.s.Query(`SELECT session_id, duration FROM system_traces.sessions WHERE session_id IN ?`, list).
		WithContext(ctx).Consistency(gocql.One).Iter()
	var id gocql.UUID
	var duration *int
	for iter.Scan(&id, &duration) {
		for _, i := range at[id] {
			done[i] = duration != nil
		}
		duration = nil
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("read system_traces.sessions: %w", err)
	}
	return done, nil
}

// Events returns the node's events of each of ids, as tracing.Event with Source "node",
// in one query.
func (n *NodeEvents) Events(ctx context.Context, ids [][16]byte) ([][]tracing.Event, error) {
	list, at := uuids(ids)
	evs := make([][]tracing.Event, len(ids))
	iter := n.s.Query(`SELECT session_id, event_id, activity, source_elapsed FROM system_traces.events WHERE session_id IN ?`, list).
		WithContext(ctx).Consistency(gocql.One).Iter()
	var id, eventID gocql.UUID
	var activity string
	var elapsed int
	for iter.Scan(&id, &eventID, &activity, &elapsed) {
		// The event id is a time UUID: the node's own clock when the event happened.
		e := tracing.Event{Activity: activity, Source: tracing.SourceNode, SourceElapsedUS: int64(elapsed), Time: eventID.Time()}
		for _, i := range at[id] {
			evs[i] = append(evs[i], e)
		}
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("read system_traces.events: %w", err)
	}
	return evs, nil
}

// Keyspace is the keyspace TableSink writes.
const Keyspace = "tracecar_traces"

// DefaultReplication is the keyspace's replication, as ScyllaDB gives system_traces.
const DefaultReplication = "{'class': 'SimpleStrategy', 'replication_factor': 2}"

// schema follows ScyllaDB's system_traces (tracing/trace_keyspace_helper.cc), minus
// sessions_time_idx, plus the W3C trace context of a session (traceColumns) in sessions and
// node_slow_log.
var schema = []string{
	`CREATE TABLE IF NOT EXISTS ` + Keyspace + `.sessions (session_id uuid, command text, client inet,
		coordinator inet, duration int, parameters map<text, text>, request text, started_at timestamp,
		request_size int, response_size int, username text, trace_id text, parent_span_id text,
		PRIMARY KEY ((session_id)))`,
	`CREATE TABLE IF NOT EXISTS ` + Keyspace + `.events (session_id uuid, event_id timeuuid, activity text,
		source inet, source_elapsed int, thread text, scylla_parent_id bigint, scylla_span_id bigint,
		PRIMARY KEY ((session_id), event_id))`,
	`CREATE TABLE IF NOT EXISTS ` + Keyspace + `.node_slow_log (node_ip inet, shard int, session_id uuid,
		date timestamp, start_time timeuuid, command text, duration int, parameters map<text, text>,
		source_ip inet, table_names set<text>, username text, trace_id text, parent_span_id text,
		PRIMARY KEY (start_time, node_ip, shard))`,
	`CREATE TABLE IF NOT EXISTS ` + Keyspace + `.node_slow_log_time_idx (minute timestamp, started_at timestamp,
		session_id uuid, start_time timeuuid, node_ip inet, shard int, PRIMARY KEY (minute, started_at, session_id))`,
}

// traceColumns are the columns that sessions and node_slow_log have beyond ScyllaDB's
// schema: the caller's W3C trace id and span id, in lower-case hex, null without a trace
// context. Tables created before they existed get them with ALTER TABLE … ADD.
var traceColumns = []string{"trace_id", "parent_span_id"}

// tablesWithTraceColumns are the tables that hold traceColumns.
var tablesWithTraceColumns = []string{"sessions", "node_slow_log"}

const (
	insertSession = `INSERT INTO ` + Keyspace + `.sessions (session_id, command, client, coordinator, duration,
		parameters, request, started_at, username, trace_id, parent_span_id)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TTL ?`
	insertEvent = `INSERT INTO ` + Keyspace + `.events (session_id, event_id, activity, source, source_elapsed,
		thread) VALUES (?, ?, ?, ?, ?, ?) USING TTL ?`
	insertSlowLog = `INSERT INTO ` + Keyspace + `.node_slow_log (node_ip, shard, session_id, date, start_time,
		command, duration, parameters, source_ip, username, trace_id, parent_span_id)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TTL ?`
	insertSlowLogIdx = `INSERT INTO ` + Keyspace + `.node_slow_log_time_idx (minute, started_at, session_id,
		start_time, node_ip, shard) VALUES (?, ?, ?, ?, ?, ?) USING TTL ?`
)

// TableSink is a tracing.Sink writing sessions into tracecar_traces: sessions and events
// for every session, node_slow_log and node_slow_log_time_idx for the slow ones (fast and
// full mode). Every row is written USING TTL ttl(). It creates the keyspace and tables on
// its first Write (retrying on later ones if that fails). The mode and the error of a
// session go into its parameters map as "mode" and "error". A TableSink is safe for
// concurrent use.
type TableSink struct {
	// Replication is the replication map of the keyspace it creates, in CQL; empty means
	// DefaultReplication. Set it before the first Write.
	Replication string

	s   *gocql.Session
	ttl func() int64

	mu    sync.Mutex
	ready bool
}

// NewTableSink returns a TableSink writing through s, with ttl giving the TTL in seconds
// of each write (Tracer.Config().TTLSeconds, typically); 0 means no expiry.
func NewTableSink(s *gocql.Session, ttl func() int64) *TableSink {
	return &TableSink{s: s, ttl: ttl}
}

// Name returns "cql".
func (*TableSink) Name() string { return "cql" }

func (t *TableSink) setup(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ready {
		return nil
	}
	repl := t.Replication
	if repl == "" {
		repl = DefaultReplication
	}
	stmts := append([]string{`CREATE KEYSPACE IF NOT EXISTS ` + Keyspace + ` WITH replication = ` + repl}, schema...)
	for _, st := range stmts {
		if err := t.s.Query(st).WithContext(ctx).Exec(); err != nil {
			return fmt.Errorf("create %s: %w", strings.Fields(st)[5], err)
		}
	}
	for _, table := range tablesWithTraceColumns {
		if err := t.addColumns(ctx, table, traceColumns); err != nil {
			return err
		}
	}
	t.ready = true
	return nil
}

// addColumns adds to table those of the text columns cols that it lacks: a table created by
// an older tracecar has none of them, and CREATE TABLE IF NOT EXISTS leaves it as it is.
func (t *TableSink) addColumns(ctx context.Context, table string, cols []string) error {
	have := map[string]bool{}
	iter := t.s.Query(`SELECT column_name FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?`,
		Keyspace, table).WithContext(ctx).Iter()
	var name string
	for iter.Scan(&name) {
		have[name] = true
	}
	if err := iter.Close(); err != nil {
		return fmt.Errorf("read the columns of %s.%s: %w", Keyspace, table, err)
	}
	for _, c := range cols {
		if have[c] {
			continue
		}
		if err := t.s.Query(`ALTER TABLE ` + Keyspace + `.` + table + ` ADD ` + c + ` text`).WithContext(ctx).Exec(); err != nil {
			return fmt.Errorf("add column %s to %s.%s: %w", c, Keyspace, table, err)
		}
	}
	return nil
}

// Write inserts s's rows in one unlogged batch.
func (t *TableSink) Write(ctx context.Context, s *tracing.Session) error {
	if err := t.setup(ctx); err != nil {
		return err
	}
	id, err := cql.ParseUUID(s.ID)
	if err != nil {
		return fmt.Errorf("session id %q: %w", s.ID, err)
	}
	sid := gocql.UUID(id)
	ttl := int(t.ttl())
	client, coord := inet(s.Client), inet(s.Coordinator)
	dur := int(min(s.DurationUS, 1<<31-1))
	params := make(map[string]string, len(s.Parameters)+2)
	for k, v := range s.Parameters {
		params[k] = v
	}
	params["mode"] = s.Mode
	if s.Error != "" {
		params["error"] = s.Error
	}
	started := s.StartedAt.UTC().Truncate(time.Millisecond)

	b := t.s.NewBatch(gocql.UnloggedBatch).WithContext(ctx)
	traceID, parentID := nullable(s.TraceID), nullable(s.ParentSpanID)
	b.Query(insertSession, sid, s.Command, client, coord, dur, params, s.Request, started, s.Username, traceID, parentID, ttl)
	var sentUS int64
	for _, e := range s.Events {
		at := e.SourceElapsedUS
		src := coord // the sidecar stands in front of the coordinator
		if e.Source == tracing.SourceNode {
			at += sentUS
		} else if e.Activity == tracing.EventSentToNode {
			sentUS = e.SourceElapsedUS
		}
		eid := gocql.UUID(cql.NewTimeUUID(s.StartedAt.Add(time.Duration(at) * time.Microsecond)))
		b.Query(insertEvent, sid, eid, e.Activity, src, int(e.SourceElapsedUS), e.Source, ttl)
	}
	if s.Mode == tracing.ModeFast || s.Mode == tracing.ModeFull {
		start := gocql.UUID(cql.NewTimeUUID(s.StartedAt))
		b.Query(insertSlowLog, coord, 0, sid, started, start, statement(s), dur, params, client, s.Username, traceID, parentID, ttl)
		b.Query(insertSlowLogIdx, started.Truncate(time.Minute), started, sid, start, coord, 0, ttl)
	}
	if err := t.s.ExecuteBatch(b); err != nil {
		return fmt.Errorf("write session %s: %w", s.ID, err)
	}
	return nil
}

// Close does nothing: the gocql session belongs to the caller.
func (*TableSink) Close(context.Context) error { return nil }

// statement is the session's CQL text, as node_slow_log.command holds it.
func statement(s *tracing.Session) string {
	if q, ok := s.Parameters["query"]; ok {
		return q
	}
	var qs []string
	for i := 0; ; i++ {
		q, ok := s.Parameters[fmt.Sprintf("query[%d]", i)]
		if !ok {
			break
		}
		qs = append(qs, q)
	}
	if len(qs) == 0 {
		return s.Command
	}
	return strings.Join(qs, "; ")
}

// nullable returns nil (null) for "", so that a session without a trace context writes no
// value rather than an empty string.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// inet returns the IP of an "addr:port" or bare address, or nil (null) when it has none.
func inet(s string) net.IP {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return net.IP(ap.Addr().Unmap().AsSlice())
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return net.IP(a.Unmap().AsSlice())
	}
	return nil
}
