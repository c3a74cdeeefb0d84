// Package auditsink holds the audit log's sinks that need a CQL driver, so that package
// audit stays free of gocql: Table writes ScyllaDB's audit.audit_log in the node.
package auditsink

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/gocql/gocql"

	"github.com/tracecar/tracecar/audit"
)

// The keyspace and table, as ScyllaDB names them.
const (
	Keyspace  = "audit"
	TableName = "audit_log"
)

// createTable is ScyllaDB's audit.audit_log (audit/audit_cf_storage_helper.cc), plus
// error_code and batch_id, which ScyllaDB does not have.
const createTable = `CREATE TABLE IF NOT EXISTS audit.audit_log (
	date timestamp,
	node inet,
	event_time timeuuid,
	category text,
	consistency text,
	table_name text,
	keyspace_name text,
	operation text,
	source inet,
	username text,
	error boolean,
	error_code int,
	batch_id text,
	PRIMARY KEY ((date, node), event_time))`

// scyllaColumns are ScyllaDB's columns, in the order of the INSERT's values.
var scyllaColumns = []string{"date", "node", "event_time", "category", "consistency", "table_name",
	"keyspace_name", "operation", "source", "username", "error"}

// The bounds of one UNLOGGED batch. A batch holds one partition only, so Cassandra's
// batch size thresholds, which apply across partitions, do not apply; these keep a batch
// well inside a write timeout and a frame.
const (
	maxBatchRows  = 64
	maxBatchBytes = 128 << 10
)

// Sessioner gives the gocql session to the node. cqlsink.Connector is one: the sidecar's
// node session, shared with the tracing sinks.
type Sessioner interface {
	Session(ctx context.Context) (*gocql.Session, error)
}

// Table is an audit.Sink writing ScyllaDB's audit.audit_log table in the node, at
// consistency ONE as ScyllaDB does. On its first Write it creates the keyspace (with
// NetworkTopologyStrategy and three replicas in each data center, or as many as the data
// center has nodes) and the table if absent. A table made by ScyllaDB itself lacks
// error_code and batch_id: Table then writes ScyllaDB's columns only, and never alters
// it.
//
// Each Write sends its records as UNLOGGED batches, one partition (date, node) each, of
// at most 64 rows and 128 KiB, one after the other; it returns the first error, after
// which the batches before it were written. A row's event_time is a time UUID of the
// record's own time, to the 100 ns, unique (gocql's clock sequence tells apart the
// records of one instant).
//
// It is safe for concurrent use.
type Table struct {
	// Node is the node's address, for records whose Node is not an address. Unset, it is
	// read from the node's system.local when the sink connects.
	Node netip.Addr

	sessions Sessioner

	mu      sync.Mutex
	session *gocql.Session // the session the table was set up on
	insert  string
	extra   bool         // the table has error_code and batch_id
	failed  *failedBatch // the last Write, if it failed
}

// NewTable returns a Table writing through the sessions of s. It connects on its first
// Write.
func NewTable(s Sessioner) *Table { return &Table{sessions: s} }

// Name is "table".
func (t *Table) Name() string { return "table" }

// Write inserts recs. The Log retries a failed Write with the same records: the rows of
// a retry have the event_time of the first try, so that a batch the node applied before
// failing (a timeout) is written over, not twice.
func (t *Table) Write(ctx context.Context, recs []audit.Record) error {
	if len(recs) == 0 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	ids := t.resume(recs)
	s, err := t.setup(ctx)
	if err == nil {
		for i := 0; i < len(recs) && err == nil; {
			var n int
			var b *gocql.Batch
			if n, b, err = t.batch(s, recs[i:], ids[i:]); err == nil {
				if err = s.ExecuteBatch(b.WithContext(ctx)); err != nil {
					err = fmt.Errorf("write %s.%s: %w", Keyspace, TableName, err)
				}
			}
			i += n
		}
	}
	if err != nil {
		t.failed = &failedBatch{n: len(recs), first: recs[0], last: recs[len(recs)-1], ids: ids}
	}
	return err
}

// failedBatch is a Write that failed, and the event_time of its rows.
type failedBatch struct {
	n           int
	first, last audit.Record
	ids         []gocql.UUID
}

// resume returns the event_time of each of recs: those of the Write that failed last
// when recs are its records, else new ones.
func (t *Table) resume(recs []audit.Record) []gocql.UUID {
	f := t.failed
	t.failed = nil
	if f != nil && len(recs) == f.n && recs[0] == f.first && recs[len(recs)-1] == f.last {
		return f.ids
	}
	ids := make([]gocql.UUID, len(recs))
	for i := range recs {
		ids[i] = gocql.UUIDFromTime(recs[i].EventTime)
	}
	return ids
}

// Sync has nothing to do: a Write returns once the node has answered.
func (t *Table) Sync(context.Context) error { return nil }

// Close leaves the session open: it is the sidecar's, shared.
func (t *Table) Close(context.Context) error { return nil }

// batch makes the UNLOGGED batch for the first records of recs that share a partition,
// within the bounds, and says how many it took.
func (t *Table) batch(s *gocql.Session, recs []audit.Record, ids []gocql.UUID) (int, *gocql.Batch, error) {
	b := s.NewBatch(gocql.UnloggedBatch)
	b.Cons = gocql.One
	var day time.Time
	var node netip.Addr
	size := 0
	n := 0
	for ; n < len(recs) && n < maxBatchRows; n++ {
		r := &recs[n]
		d, a := r.EventTime.UTC().Truncate(24*time.Hour), t.node(r.Node)
		if !a.IsValid() {
			return 0, nil, fmt.Errorf("audit table: record node %q is not an address, and the sink's Node is unset", r.Node)
		}
		size += len(r.Operation) + 128
		if n > 0 && (!d.Equal(day) || a != node || size > maxBatchBytes) {
			break
		}
		day, node = d, a
		vals := []any{d, net.IP(a.AsSlice()), ids[n], r.Category,
			r.Consistency, r.Table, r.Keyspace, r.Operation, inet(r.Source), r.Username, r.Error}
		if t.extra {
			vals = append(vals, r.ErrorCode, r.BatchID)
		}
		b.Query(t.insert, vals...)
	}
	return n, b, nil
}

// node reads a record's node, an address with or without a port, or falls back on t.Node.
func (t *Table) node(s string) netip.Addr {
	if a := addr(s); a.IsValid() {
		return a
	}
	return t.Node
}

// addr reads an address, with or without a port, or returns the zero Addr.
func addr(s string) netip.Addr {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap()
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap()
	}
	return netip.Addr{}
}

// inet is s as gocql binds an inet, or nil (null) when s is not an address.
func inet(s string) any {
	if a := addr(s); a.IsValid() {
		return net.IP(a.AsSlice())
	}
	return nil
}

// setup returns the session, creating the keyspace and the table, and reading which
// columns the table has, on the first Write through a session.
func (t *Table) setup(ctx context.Context) (*gocql.Session, error) {
	s, err := t.sessions.Session(ctx)
	if err != nil {
		return nil, err
	}
	if s == t.session {
		return s, nil
	}
	if !t.Node.IsValid() {
		if t.Node, err = localAddr(ctx, s); err != nil {
			return nil, err
		}
	}
	if err := createSchema(ctx, s); err != nil {
		return nil, err
	}
	cols, err := columns(ctx, s)
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, c := range scyllaColumns {
		if !cols[c] {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("table %s.%s exists without the columns %s of ScyllaDB's schema", Keyspace, TableName, strings.Join(missing, ", "))
	}
	names := scyllaColumns
	t.extra = cols["error_code"] && cols["batch_id"]
	if t.extra {
		names = append(names[:len(names):len(names)], "error_code", "batch_id")
	}
	t.insert = fmt.Sprintf("INSERT INTO %s.%s (%s) VALUES (%s)", Keyspace, TableName,
		strings.Join(names, ", "), strings.TrimSuffix(strings.Repeat("?, ", len(names)), ", "))
	t.session = s
	return s, nil
}

// localAddr returns the node's address as it gives it in system.local: its
// rpc_address, or its broadcast_address when it listens on every address.
func localAddr(ctx context.Context, s *gocql.Session) (netip.Addr, error) {
	var rpc, broadcast net.IP
	err := s.Query(`SELECT rpc_address, broadcast_address FROM system.local WHERE key = 'local'`).
		WithContext(ctx).Scan(&rpc, &broadcast)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("read the node's address from system.local: %w", err)
	}
	for _, ip := range []net.IP{rpc, broadcast} {
		if a, ok := netip.AddrFromSlice(ip); ok && !a.Unmap().IsUnspecified() {
			return a.Unmap(), nil
		}
	}
	return netip.Addr{}, fmt.Errorf("system.local gives no address for the node (rpc_address %v, broadcast_address %v)", rpc, broadcast)
}

// createSchema creates the keyspace and the table, unless they exist.
func createSchema(ctx context.Context, s *gocql.Session) error {
	var exists string
	err := s.Query(`SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = ?`, Keyspace).
		WithContext(ctx).Scan(&exists)
	if errors.Is(err, gocql.ErrNotFound) {
		repl, err := replication(ctx, s)
		if err != nil {
			return err
		}
		if err := s.Query(`CREATE KEYSPACE IF NOT EXISTS audit WITH replication = ` + repl).WithContext(ctx).Exec(); err != nil {
			return fmt.Errorf("create keyspace %s: %w", Keyspace, err)
		}
	} else if err != nil {
		return fmt.Errorf("read system_schema.keyspaces: %w", err)
	}
	if err := s.Query(createTable).WithContext(ctx).Exec(); err != nil {
		return fmt.Errorf("create table %s.%s: %w", Keyspace, TableName, err)
	}
	return nil
}

// replication is ScyllaDB's choice for its audit keyspace: NetworkTopologyStrategy with
// three replicas in each data center, here at most as many as the data center has nodes,
// read from system.local and system.peers.
func replication(ctx context.Context, s *gocql.Session) (string, error) {
	nodes := map[string]int{}
	var dc string
	if err := s.Query(`SELECT data_center FROM system.local WHERE key = 'local'`).WithContext(ctx).Scan(&dc); err != nil {
		return "", fmt.Errorf("read system.local: %w", err)
	}
	nodes[dc]++
	it := s.Query(`SELECT data_center FROM system.peers`).WithContext(ctx).Iter()
	for it.Scan(&dc) {
		nodes[dc]++
	}
	if err := it.Close(); err != nil {
		return "", fmt.Errorf("read system.peers: %w", err)
	}
	var b strings.Builder
	b.WriteString("{'class': 'NetworkTopologyStrategy'")
	for dc, n := range nodes {
		fmt.Fprintf(&b, ", '%s': %d", strings.ReplaceAll(dc, "'", "''"), min(n, 3))
	}
	b.WriteString("}")
	return b.String(), nil
}

// columns returns the names of audit.audit_log's columns.
func columns(ctx context.Context, s *gocql.Session) (map[string]bool, error) {
	cols := map[string]bool{}
	it := s.Query(`SELECT column_name FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?`,
		Keyspace, TableName).WithContext(ctx).Iter()
	var c string
	for it.Scan(&c) {
		cols[c] = true
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("read system_schema.columns: %w", err)
	}
	return cols, nil
}
