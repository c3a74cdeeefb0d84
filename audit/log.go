package audit

import (
	"context"
	"sync"
	"sync/atomic"
)

// Settings say what is audited. The zero value audits nothing.
type Settings struct {
	Enabled bool
	// Categories is the set of audited categories, a bit per Category (1<<c).
	Categories uint8
	// Keyspaces, when not empty, limits DDL, DML and QUERY records to these keyspaces.
	Keyspaces map[string]bool
	// Tables, when not empty, limits them to these "keyspace.table" names.
	Tables map[string]bool
	// ExcludeUsers are never audited.
	ExcludeUsers map[string]bool
}

// Has reports whether c is among the audited categories.
func (s *Settings) Has(c Category) bool { return s.Categories&(1<<c) != 0 }

// Policy says what a full queue does to the request that adds a record.
type Policy uint8

const (
	// Block makes the request wait for room, as Cassandra's audit with block: true.
	Block Policy = iota
	// Drop never waits: the record is dropped and counted.
	Drop
)

// Log is the audit log: its settings, read with one atomic load per request, and a
// bounded queue in front of its sinks. It is safe for concurrent use.
type Log struct {
	settings atomic.Pointer[Settings]
	policy   Policy
	queue    chan Record
	sinks    []Sink
	dropped  atomic.Uint64
	done     chan struct{}
	stop     sync.Once
}

// New returns a Log writing to sinks behind a queue of size records, with nothing
// audited until Set. Close stops it.
func New(policy Policy, size int, sinks ...Sink) *Log {
	l := &Log{policy: policy, queue: make(chan Record, size), sinks: sinks, done: make(chan struct{})}
	l.settings.Store(&Settings{})
	go l.run()
	return l
}

// Set replaces the settings.
func (l *Log) Set(s Settings) { l.settings.Store(&s) }

// Settings returns the current settings; the caller must not modify them.
func (l *Log) Settings() *Settings { return l.settings.Load() }

// Enabled is the data path's one check: a single atomic load.
func (l *Log) Enabled() bool { return l.settings.Load().Enabled }

// Wants reports whether a record of category c on keyspace.table by user is audited.
func (l *Log) Wants(c Category, keyspace, table, user string) bool {
	s := l.settings.Load()
	if !s.Enabled || !s.Has(c) || s.ExcludeUsers[user] {
		return false
	}
	if c == AUTH || c == DCL || c == ADMIN {
		return true
	}
	if len(s.Keyspaces) > 0 && !s.Keyspaces[keyspace] {
		return false
	}
	if len(s.Tables) > 0 && !s.Tables[keyspace+"."+table] {
		return false
	}
	return true
}

// Add queues r for the sinks. Under Block it waits for room; under Drop a full queue
// drops r and counts it.
func (l *Log) Add(r Record) {
	if l.policy == Drop {
		select {
		case l.queue <- r:
		default:
			l.dropped.Add(1)
		}
		return
	}
	l.queue <- r
}

// Dropped counts the records dropped under Drop.
func (l *Log) Dropped() uint64 { return l.dropped.Load() }

func (l *Log) run() {
	defer close(l.done)
	batch := make([]Record, 0, 64)
	for r := range l.queue {
		batch = l.more(append(batch[:0], r))
		for _, s := range l.sinks {
			_ = s.Write(context.Background(), batch)
		}
	}
}

// more adds to batch what is queued already, without waiting, up to its capacity.
func (l *Log) more(batch []Record) []Record {
	for len(batch) < cap(batch) {
		select {
		case r, ok := <-l.queue:
			if !ok {
				return batch
			}
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}

// Close writes what is queued, then syncs and closes the sinks. Add must not be called
// after Close.
func (l *Log) Close(ctx context.Context) error {
	l.stop.Do(func() { close(l.queue) })
	select {
	case <-l.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	var first error
	for _, s := range l.sinks {
		if err := s.Close(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}
