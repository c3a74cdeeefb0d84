package tracing

import (
	"container/heap"
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// NodeEventSource reads a node's own trace of the sessions it traced because the request
// carried the tracing flag (sampled and client sessions). The Tracer asks about many
// sessions at once, at most MaxNodeEventBatch in a call: whether the node has finished
// them, a bounded number of times, and then the events of each once, when the node has
// finished it (or when the Tracer stops waiting for it).
type NodeEventSource interface {
	// Finished reports, for each of ids in order, whether the node has finished writing
	// that session's trace, so that no more events will come.
	Finished(ctx context.Context, ids [][16]byte) ([]bool, error)
	// Events returns the events the node has written so far for each of ids, in order.
	Events(ctx context.Context, ids [][16]byte) ([][]Event, error)
}

// MaxNodeEventBatch is the most session ids the Tracer passes to one NodeEventSource call:
// ScyllaDB's default bound on the partition keys that one query may restrict with IN
// (max_partition_key_restrictions_per_query).
const MaxNodeEventBatch = 100

// Fetch schedule: the node writes its trace asynchronously, so the first look waits a
// little and later ones back off, up to about 6 s in all.
var fetchDelays = []time.Duration{
	20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, 1 * time.Second, 2 * time.Second, 2 * time.Second,
}

// fetchTick is the grid that looks at the node fall on: the sessions that come due within
// one tick are asked about together, so that the node is asked twice per tick and not
// twice per session. A tick's cost is fixed, whatever its sessions: the two queries, the
// driver's goroutines and the wake-ups of the fetcher and the sinks. It was about 1 ms of
// the sidecar's CPU on a 2-core VM (perf, most of it scheduling and the driver, not the
// fetcher's own work), so a 100 ms grid cost about 10 ms of CPU a second of sampling: at
// probability 0.01 and 4,000 op/s, sampled − off was +3.5 to +4.2 µs/op of sidecar CPU, and
// about +1.2 with this grid (loadcheck, TestGuardrailCPUEstimate; docs/tracing.md). The
// price is that a sampled session is recorded up to a tick later.
const fetchTick = 500 * time.Millisecond

// fetchTimeout bounds one call to the source.
const fetchTimeout = 2 * time.Second

type fetchItem struct {
	s       *Session
	id      [16]byte
	attempt int       // looks taken
	offered time.Time // when the session ended
	due     time.Time
	seq     uint64 // the order of offers: sessions due together are recorded in that order
}

// fetcher is the bounded worker that merges node events into sessions before they are
// recorded. offer never blocks.
type fetcher struct {
	src     NodeEventSource
	ch      chan *fetchItem
	limit   int
	record  func(*Session)
	work    WorkMeter // counts the merging and recording; nil counts nothing
	log     zerolog.Logger
	epoch   time.Time // the origin of the fetchTick grid
	stopCh  chan context.Context
	exited  chan struct{}
	dropped atomic.Uint64
	failed  atomic.Uint64 // sessions whose look at the node failed, once per look
}

func newFetcher(src NodeEventSource, size int, record func(*Session), work WorkMeter, log zerolog.Logger) *fetcher {
	f := &fetcher{
		src: src, ch: make(chan *fetchItem, size), limit: size, record: record, work: work, log: log,
		epoch: time.Now(), stopCh: make(chan context.Context, 1), exited: make(chan struct{}),
	}
	go f.run()
	return f
}

// offer queues s for node events, or reports false when the queue is full.
func (f *fetcher) offer(s *Session, id [16]byte) bool {
	select {
	case f.ch <- &fetchItem{s: s, id: id, offered: time.Now()}:
		return true
	default:
		f.dropped.Add(1)
		return false
	}
}

// dueAt returns the first point of the fetchTick grid at or after t.
func (f *fetcher) dueAt(t time.Time) time.Time {
	at := t.Sub(f.epoch)
	return f.epoch.Add((at + fetchTick - 1) / fetchTick * fetchTick)
}

// run waits for a first session, then wakes once per tick of the grid while any wait: it
// takes the sessions offered since the last tick and asks the node about those due. A
// session offered while others wait does not wake it, so that a sampled session costs no
// goroutine wake-up of its own.
func (f *fetcher) run() {
	defer close(f.exited)
	var waiting fetchQueue // by due time
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	batch := make([]*fetchItem, 0, MaxNodeEventBatch)
	var seq uint64
	take := func(it *fetchItem) {
		seq++
		// From its offer, not from now: the sessions offered since the last tick come
		// due with those taken at once.
		it.due, it.seq = f.dueAt(it.offered.Add(fetchDelays[0])), seq
		heap.Push(&waiting, it)
	}
	for {
		if len(waiting) == 0 {
			select {
			case it := <-f.ch:
				take(it)
			case ctx := <-f.stopCh:
				f.drain(ctx, waiting)
				return
			}
		}
		// The next point of the grid, or now when the earliest session is overdue.
		timer.Reset(max(min(time.Until(waiting[0].due), time.Until(f.dueAt(time.Now().Add(time.Nanosecond)))), 0))
		select {
		case <-timer.C:
		case ctx := <-f.stopCh:
			f.drain(ctx, waiting)
			return
		}
		for len(waiting) < f.limit { // full: leave new items in the channel, which then drops
			select {
			case it := <-f.ch:
				take(it)
				continue
			default:
			}
			break
		}
		now := time.Now()
		for len(waiting) > 0 && !waiting[0].due.After(now) {
			batch = batch[:0]
			for len(batch) < MaxNodeEventBatch && len(waiting) > 0 && !waiting[0].due.After(now) {
				batch = append(batch, heap.Pop(&waiting).(*fetchItem))
			}
			for _, it := range f.look(context.Background(), batch) {
				heap.Push(&waiting, it)
			}
		}
	}
}

// drain records what the fetcher holds and what is offered still, with one last look at
// the events of each while ctx allows.
func (f *fetcher) drain(ctx context.Context, waiting []*fetchItem) {
	for {
		select {
		case it := <-f.ch:
			waiting = append(waiting, it)
			continue
		default:
		}
		break
	}
	for _, it := range waiting {
		it.attempt = len(fetchDelays) // the last look: recorded whatever it finds
	}
	for len(waiting) > 0 {
		n := min(len(waiting), MaxNodeEventBatch)
		if ctx.Err() == nil {
			f.read(ctx, waiting[:n])
		} else {
			for _, it := range waiting[:n] {
				f.record(it.s)
			}
		}
		waiting = waiting[n:]
	}
}

// fetchQueue is a min-heap of fetch items by due time, then by offer.
type fetchQueue []*fetchItem

func (q fetchQueue) Len() int { return len(q) }
func (q fetchQueue) Less(i, j int) bool {
	a, b := q[i], q[j]
	return a.due.Before(b.due) || a.due.Equal(b.due) && a.seq < b.seq
}
func (q fetchQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *fetchQueue) Push(x any)   { *q = append(*q, x.(*fetchItem)) }
func (q *fetchQueue) Pop() any {
	old := *q
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return it
}

// look asks the node whether it has finished the sessions of batch, reads the events of
// those it has and of those out of looks, once, and records them. It returns the others,
// due again.
func (f *fetcher) look(ctx context.Context, batch []*fetchItem) (again []*fetchItem) {
	done, err := ask(ctx, batch, f.src.Finished)
	if err == nil && len(done) != len(batch) {
		err = fmt.Errorf("node answered for %d sessions of %d", len(done), len(batch))
	}
	if err != nil {
		f.failed.Add(uint64(len(batch)))
		f.log.Debug().Err(err).Int("sessions", len(batch)).Msg("ask the node whether its traces are finished")
	}
	var read []*fetchItem
	for i, it := range batch {
		it.attempt++
		if err == nil && done[i] || it.attempt >= len(fetchDelays) {
			read = append(read, it)
			continue
		}
		it.due = f.dueAt(time.Now().Add(fetchDelays[it.attempt]))
		again = append(again, it)
	}
	if len(read) > 0 {
		again = append(again, f.read(ctx, read)...)
	}
	return again
}

// read reads the node's events of items and records them with those events merged in. When
// the read fails, it returns the items that have looks left, due again, and records the
// others without node events.
func (f *fetcher) read(ctx context.Context, items []*fetchItem) (again []*fetchItem) {
	evs, err := ask(ctx, items, f.src.Events)
	if err == nil && len(evs) != len(items) {
		err = fmt.Errorf("node answered for %d sessions of %d", len(evs), len(items))
	}
	if err != nil {
		f.failed.Add(uint64(len(items)))
		f.log.Debug().Err(err).Int("sessions", len(items)).Msg("fetch node events")
	}
	if f.work != nil {
		mark := f.work.Begin()
		defer f.work.End(mark)
	}
	for i, it := range items {
		switch {
		case err == nil:
			it.s.Events = mergeNodeEvents(it.s.Events, evs[i])
		case it.attempt < len(fetchDelays) && ctx.Err() == nil:
			it.due = f.dueAt(time.Now().Add(fetchDelays[it.attempt]))
			again = append(again, it)
			continue
		}
		f.record(it.s)
	}
	return again
}

// mergeNodeEvents returns the sidecar's events with the node's inserted after "sent to
// node" (the node's clock starts about then), each keeping its own source_elapsed.
func mergeNodeEvents(sidecar, node []Event) []Event {
	if len(node) == 0 {
		return sidecar
	}
	at := len(sidecar)
	for i, e := range sidecar {
		if e.Activity == EventNodeResponded || e.Activity == EventResponseSent {
			at = i
			break
		}
	}
	out := make([]Event, 0, len(sidecar)+len(node))
	out = append(out, sidecar[:at]...)
	for _, e := range node {
		e.Source = SourceNode
		out = append(out, e)
	}
	return append(out, sidecar[at:]...)
}

// stopGrace is how long stop waits, once its context is done, for the fetcher to record
// what it still holds without the node's events: the fetch in flight ends with the context,
// and the rest are recorded at once.
const stopGrace = 2 * time.Second

// stop gives every session still waiting one last look at the node while ctx allows, and
// records the rest without the node's events. Running out of ctx is not an error: nothing
// is lost but node events, which are best effort. It is an error only when the fetcher has
// not exited stopGrace after ctx is done.
func (f *fetcher) stop(ctx context.Context) error {
	f.stopCh <- ctx
	select {
	case <-f.exited:
		return nil
	case <-ctx.Done():
	}
	select {
	case <-f.exited:
		return nil
	case <-time.After(stopGrace):
		return fmt.Errorf("stop node-event fetcher: %w", ctx.Err())
	}
}

// ask calls a source method with the ids of items, within fetchTimeout, and gives up when
// ctx is done even if the source does not: a driver blocked in a write to a node that does
// not read would otherwise hold the fetcher, the sessions it holds, and the Tracer's
// Close. The abandoned call ends on its own.
func ask[T any](ctx context.Context, items []*fetchItem, call func(context.Context, [][16]byte) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	ids := make([][16]byte, len(items))
	for i, it := range items {
		ids[i] = it.id
	}
	type answer struct {
		v   T
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		v, err := call(ctx, ids)
		ch <- answer{v, err}
	}()
	select {
	case a := <-ch:
		return a.v, a.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// meteredEvents is a NodeEventSource whose calls a WorkMeter counts: the calling
// goroutine's share of the fetch, which is where the node's rows are decoded.
type meteredEvents struct {
	src NodeEventSource
	w   WorkMeter
}

func (m meteredEvents) Finished(ctx context.Context, ids [][16]byte) ([]bool, error) {
	mark := m.w.Begin()
	defer m.w.End(mark)
	return m.src.Finished(ctx, ids)
}

func (m meteredEvents) Events(ctx context.Context, ids [][16]byte) ([][]Event, error) {
	mark := m.w.Begin()
	defer m.w.End(mark)
	return m.src.Events(ctx, ids)
}
