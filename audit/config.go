package audit

import (
	"fmt"
	"time"

	"github.com/rs/zerolog"
)

// Defaults of Config.
const (
	// DefaultQueue is the records each sink holds in memory before the policy applies.
	DefaultQueue = 4096
	// DefaultSync is how often a sink is synced (the file's fsync).
	DefaultSync = time.Second
	// DefaultRetry is how long a sink that failed waits before it tries again.
	DefaultRetry = 500 * time.Millisecond
	// flushDelay is how long a sink's writer lets records gather once one is queued, so
	// that it wakes and writes once per burst rather than once per record; a queue that
	// fills to half wakes it at once. Each round of the writer costs wake-ups of threads
	// (a timer, the writer's thread, the write's hand-off) worth tens of microseconds on a
	// virtual machine: at 10 ms, a third of what auditing DML cost under loadcheck's write
	// load was these. It is never more than half of Config.Sync (gatherTime), so that a
	// record reaches the sink well within one sync interval.
	flushDelay = 25 * time.Millisecond
)

// gatherTime is how long a writer lets records gather for a sync interval of sync.
func gatherTime(sync time.Duration) time.Duration { return min(flushDelay, sync/2) }

// Policy says what a full queue does to the request that adds a record.
type Policy uint8

const (
	// Block makes the request wait for room, as Cassandra's audit with block: true.
	Block Policy = iota
	// Drop never waits: the record is dropped and counted.
	Drop
)

// String names the policy as --audit-policy does.
func (p Policy) String() string {
	if p == Drop {
		return "drop"
	}
	return "block"
}

// ParsePolicy parses "block" or "drop".
func ParsePolicy(s string) (Policy, error) {
	switch s {
	case "block":
		return Block, nil
	case "drop":
		return Drop, nil
	}
	return Block, fmt.Errorf("%q: want block (requests wait for a sink that falls behind) or drop (records are dropped and counted)", s)
}

// Config configures a Log. The zero value blocks, with DefaultQueue records per sink,
// syncs every DefaultSync, and has no sink.
type Config struct {
	Policy Policy
	// Queue is the records each sink holds before the policy applies; 0 means DefaultQueue.
	Queue int
	// Sync is how often each sink is synced while records are written to it: at most Sync
	// after a write; 0 means DefaultSync. A sink is also synced when the Log closes.
	Sync time.Duration
	// Retry is how long a failed sink waits before it tries the same records again; 0
	// means DefaultRetry.
	Retry time.Duration
	// Node is the node the records are about, for their node field when it is empty.
	Node string
	// Sinks receive every record.
	Sinks []Sink
	// Logger reports a sink that fails and recovers. Nil logs nothing.
	Logger *zerolog.Logger
}
