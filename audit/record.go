// Package audit is tracecar's audit log: one record per statement, login and admin
// change, filtered by category, keyspace, table and user, and written to sinks (JSON
// lines, syslog, ScyllaDB's audit.audit_log table) without losing a record silently.
package audit

import (
	"context"
	"time"
)

// Category is one of ScyllaDB's audit_categories.
type Category uint8

// The categories, named as ScyllaDB's audit_categories.
const (
	AUTH Category = iota + 1
	DDL
	DCL
	DML
	QUERY
	ADMIN
)

var categoryNames = [...]string{AUTH: "AUTH", DDL: "DDL", DCL: "DCL", DML: "DML", QUERY: "QUERY", ADMIN: "ADMIN"}

// String gives the category's name, as ScyllaDB writes it.
func (c Category) String() string {
	if int(c) < len(categoryNames) && categoryNames[c] != "" {
		return categoryNames[c]
	}
	return "UNKNOWN"
}

// Record is one audit record. Its fields and JSON names follow ScyllaDB's audit.audit_log,
// plus error_code and, for a BATCH's children, batch_id.
type Record struct {
	EventTime   time.Time `json:"event_time"`
	Node        string    `json:"node"`
	Source      string    `json:"source"`
	Username    string    `json:"username"`
	Category    string    `json:"category"`
	Operation   string    `json:"operation"`
	Keyspace    string    `json:"keyspace_name"`
	Table       string    `json:"table_name"`
	Consistency string    `json:"consistency"`
	Error       bool      `json:"error"`
	ErrorCode   int32     `json:"error_code"`
	BatchID     string    `json:"batch_id,omitempty"`
}

// Sink receives records in batches, from one goroutine, in the order they were made.
// The queue in front of it applies the policy (block or drop); a Sink may block.
type Sink interface {
	// Name names the sink in the status, /readyz and metrics: "file", "syslog", "table".
	Name() string
	// Write delivers records; it may buffer them until Sync.
	Write(ctx context.Context, recs []Record) error
	// Sync makes what was written durable (fsync for a file, a flush for a stream).
	Sync(ctx context.Context) error
	// Close syncs and releases the sink.
	Close(ctx context.Context) error
}
