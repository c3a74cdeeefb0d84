package audit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Log is the audit log: its settings, read with one atomic load per request, and a
// bounded queue in front of each of its sinks, written by a goroutine of its own. It is
// safe for concurrent use.
type Log struct {
	settings atomic.Pointer[Settings]
	cfg      Config
	sinks    []*sinkQueue
	counts   [numCategories]atomic.Uint64
	stop     chan struct{} // closed by Close: blocked adds give up, the writers get ready to end
	stopOnce sync.Once
	// sealed is closed by Close once every sink's queue is sealed (sinkQueue.seal), so that
	// a writer drains for the last time only when no add can queue any more.
	sealed chan struct{}
}

// New returns a Log writing to sinks behind a queue of size records each, with nothing
// audited until Set. Close stops it.
func New(policy Policy, size int, sinks ...Sink) *Log {
	return Open(Config{Policy: policy, Queue: size, Sinks: sinks})
}

var nopLogger = zerolog.Nop()

// Open returns a Log for cfg, with nothing audited until Set. Close stops it.
func Open(cfg Config) *Log {
	if cfg.Queue <= 0 {
		cfg.Queue = DefaultQueue
	}
	if cfg.Sync <= 0 {
		cfg.Sync = DefaultSync
	}
	if cfg.Retry <= 0 {
		cfg.Retry = DefaultRetry
	}
	if cfg.Logger == nil {
		cfg.Logger = &nopLogger
	}
	l := &Log{cfg: cfg, stop: make(chan struct{}), sealed: make(chan struct{})}
	l.settings.Store(&Settings{})
	for _, s := range cfg.Sinks {
		q := &sinkQueue{sink: s, size: cfg.Queue, kick: make(chan struct{}, 1),
			full: make(chan struct{}, 1), done: make(chan struct{}), abandoned: make(chan struct{}),
			cfg: &l.cfg, stop: l.stop, sealed: l.sealed}
		// Room for the bursts of a busy sidecar (a few hundred records in flushDelay) from
		// the start; a larger queue grows to its size only when a burst needs it.
		n := min(cfg.Queue, 1024)
		q.recs, q.spare = make([]Record, 0, n), make([]Record, 0, n)
		l.sinks = append(l.sinks, q)
		go q.run()
	}
	return l
}

// Set replaces the settings.
func (l *Log) Set(s Settings) { l.settings.Store(&s) }

// Settings returns the current settings; the caller must not modify them.
func (l *Log) Settings() *Settings { return l.settings.Load() }

// Enabled is the data path's one check: a single atomic load.
func (l *Log) Enabled() bool { return l.settings.Load().Enabled }

// HasSinks reports whether the Log writes anywhere: without a sink, enabling it would
// audit into nothing.
func (l *Log) HasSinks() bool { return len(l.sinks) > 0 }

// Policy returns the policy.
func (l *Log) Policy() Policy { return l.cfg.Policy }

// Node returns the node the records are about (Config.Node).
func (l *Log) Node() string { return l.cfg.Node }

// Wants reports whether a record of category c on keyspace.table by user is audited.
// The keyspace and table filters apply to DDL, DML and QUERY; AUTH, DCL and ADMIN records
// are filtered by category and user only.
func (l *Log) Wants(c Category, keyspace, table, user string) bool {
	s := l.settings.Load()
	if !s.Enabled || !s.Has(c) || (len(s.ExcludeUsers) > 0 && s.ExcludeUsers[user]) {
		return false
	}
	if c == AUTH || c == DCL || c == ADMIN {
		return true
	}
	if len(s.Keyspaces) > 0 && !s.Keyspaces[keyspace] {
		return false
	}
	if len(s.Tables) > 0 {
		// keyspace.table in a buffer on the stack: a map index by string(bytes) does not
		// allocate, where keyspace+"."+table would for a name of more than 32 bytes.
		var buf [128]byte
		k := append(append(append(buf[:0], keyspace...), '.'), table...)
		if !s.Tables[string(k)] {
			return false
		}
	}
	return true
}

// Add queues r for every sink. Under Block it waits for room in a sink's queue, for as
// long as that sink is behind or failing; under Drop a full queue drops r, counted for
// that sink. A zero EventTime is set to now and an empty Node to Config.Node. Add after
// Close drops r, counted.
func (l *Log) Add(r Record) {
	l.prepare(&r)
	for _, q := range l.sinks {
		q.add(&r, l.cfg.Policy, nil)
	}
}

// Submit queues r as Add does, but waits under Block only until ctx is done: then r is
// dropped for the sinks still full, counted, and Submit returns ctx's error. The admin
// API uses it, so that a failing sink never holds an operator's change for ever.
func (l *Log) Submit(ctx context.Context, r Record) error {
	l.prepare(&r)
	var err error
	for _, q := range l.sinks {
		if e := q.add(&r, l.cfg.Policy, ctx.Done()); e != nil && err == nil {
			err = e
		}
	}
	if err == errCancelled {
		err = ctx.Err()
	}
	return err
}

// prepare fills r's defaults and counts it by category.
func (l *Log) prepare(r *Record) {
	if r.EventTime.IsZero() {
		r.EventTime = time.Now()
	}
	if r.Node == "" {
		r.Node = l.cfg.Node
	}
	l.counts[categoryIndex(r.Category)].Add(1)
}

// Dropped counts the records dropped by every sink.
func (l *Log) Dropped() uint64 {
	var n uint64
	for _, q := range l.sinks {
		n += q.dropped.Load()
	}
	return n
}

// Err returns nil when every sink works, else an error saying which fail, since when and
// why: what /readyz reports.
func (l *Log) Err() error {
	var msgs []string
	for _, q := range l.sinks {
		if st := q.state.Load(); st != nil {
			msgs = append(msgs, fmt.Sprintf("audit sink %s failing since %s (policy %s): %s",
				q.sink.Name(), st.since.UTC().Format(time.RFC3339), l.cfg.Policy, st.err))
		}
	}
	if msgs == nil {
		return nil
	}
	return errors.New(strings.Join(msgs, "; "))
}

// Close writes what is queued, then syncs and closes the sinks. A sink still failing when
// ctx is done loses what it holds, counted as dropped. Records added after Close are
// dropped and counted.
func (l *Log) Close(ctx context.Context) error {
	l.stopOnce.Do(func() {
		close(l.stop)
		for _, q := range l.sinks {
			q.seal()
		}
		close(l.sealed)
	})
	var first error
	for _, q := range l.sinks {
		select {
		case <-q.done:
		case <-ctx.Done():
			q.giveUp()
			<-q.done
		}
		if err := q.closeErr; err != nil && first == nil {
			first = err
		}
	}
	return first
}
