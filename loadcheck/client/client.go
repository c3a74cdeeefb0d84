// Package client holds loadcheck's two CQL clients behind one small interface: gocql
// (DialGocql), and its own wire client (DialWire) on loadcheck/cqlconn, which speaks
// protocol v5 where gocql v1.7 stops at v4. A Session gives each worker a Client, all that
// the workloads need: statements prepared once, then run with values rewritten per
// operation. It knows nothing of workloads, modes or runs.
package client

import (
	"context"
	"crypto/tls"
	"time"
)

// Session is a client session to one target, used for one run. It is safe for concurrent
// use; each of its clients serves one worker at a time.
type Session interface {
	// Client returns worker w's client, which sends the traceparent tp with its
	// requests when tp is not nil.
	Client(w int, tp []byte) Client
	// Exec runs a statement without values, such as the schema's DDL.
	Exec(ctx context.Context, text string) error
	Close()
}

// Client is one worker's connection to the target, not safe for concurrent use: a worker
// sends one request at a time.
type Client interface {
	// Prepare readies a statement and returns its number for the calls below. A
	// statement that cannot be prepared returns the error that its every use would. On
	// gocql, the statement's requests are bound to ctx.
	Prepare(ctx context.Context, st Stmt) (int, error)
	// Query runs statement st with vals, through every page, and returns the rows read.
	Query(ctx context.Context, st int, vals [][]byte) (int64, error)
	// Write runs statement st with vals, for its effect.
	Write(ctx context.Context, st int, vals [][]byte) error
	// Batch runs statement st once per row, in one batch of type typ (cql.BatchLogged,
	// BatchUnlogged or BatchCounter), each row perRow of vals; cas says the statement
	// has a condition.
	Batch(ctx context.Context, typ byte, st int, vals [][]byte, perRow int, cas bool) error
}

// Stmt is a statement as a workload asks for it.
type Stmt struct {
	Text string
	// CL is its consistency, the session's when ""; Serial its serial consistency, none
	// when "". Both are valid consistency names (checked when the workload was read).
	CL, Serial string
	// Paged reads it by pages of Options.PageSize rows; else at the client's default.
	Paged bool
}

// Options are how sessions are made: loadcheck's --cl (checked before), --connections,
// --concurrency, --protocol-version (0: negotiated), --timeout, --tls, --compression and
// --page-size, the keyspace its sessions use, and whether the target is a cluster of
// sidecars, whose load spreads over every one (gocql only).
type Options struct {
	CL              string
	Keyspace        string
	ProtocolVersion int
	Timeout         time.Duration
	Connections     int
	Concurrency     int
	TLS             *tls.Config
	Compression     string
	PageSize        int
	Cluster         bool
}

// TraceparentKey is the custom payload key the requests carry their trace context in,
// the one tracecar reads by default.
const TraceparentKey = "traceparent"
