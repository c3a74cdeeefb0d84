package tracing

import (
	"container/heap"
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// NodeEventSource fetches a node's own trace events for a session it traced because the
// request carried the tracing flag (sampled and client sessions).
type NodeEventSource interface {
	// Events returns the events the node has written so far for sessionID, and whether
	// the node has finished the session (so no more will come). The Tracer asks again
	// while complete is false, a bounded number of times.
	Events(ctx context.Context, sessionID [16]byte) (events []Event, complete bool, err error)
}

// Fetch schedule: the node writes its trace asynchronously, so the first look waits a
// little and later ones back off, up to about 6 s in all.
var fetchDelays = []time.Duration{
	20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, 1 * time.Second, 2 * time.Second, 2 * time.Second,
}

// fetchTimeout bounds one Events call.
const fetchTimeout = 2 * time.Second

type fetchItem struct {
	s       *Session
	id      [16]byte
	attempt int
	due     time.Time
	events  []Event // the last events seen
}

// fetcher is the bounded worker that merges node events into sessions before they are
// recorded. offer never blocks.
type fetcher struct {
	src     NodeEventSource
	ch      chan *fetchItem
	limit   int
	record  func(*Session)
	log     zerolog.Logger
	stopCh  chan context.Context
	exited  chan struct{}
	dropped atomic.Uint64
	failed  atomic.Uint64
}

func newFetcher(src NodeEventSource, size int, record func(*Session), log zerolog.Logger) *fetcher {
	f := &fetcher{
		src: src, ch: make(chan *fetchItem, size), limit: size, record: record, log: log,
		stopCh: make(chan context.Context, 1), exited: make(chan struct{}),
	}
	go f.run()
	return f
}

// offer queues s for node events, or reports false when the queue is full.
func (f *fetcher) offer(s *Session, id [16]byte) bool {
	select {
	case f.ch <- &fetchItem{s: s, id: id}:
		return true
	default:
		f.dropped.Add(1)
		return false
	}
}

func (f *fetcher) run() {
	defer close(f.exited)
	var waiting fetchQueue // by due time
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		in := f.ch
		if len(waiting) >= f.limit {
			in = nil // full: leave new items in the channel, which then drops
		}
		wait := time.Hour
		if len(waiting) > 0 {
			wait = max(time.Until(waiting[0].due), 0)
		}
		timer.Reset(wait)
		select {
		case it := <-in:
			it.due = time.Now().Add(fetchDelays[0])
			heap.Push(&waiting, it)
		case <-timer.C:
			now := time.Now()
			for len(waiting) > 0 && !waiting[0].due.After(now) {
				it := heap.Pop(&waiting).(*fetchItem)
				if !f.attempt(context.Background(), it) {
					heap.Push(&waiting, it)
				}
			}
		case ctx := <-f.stopCh:
			// Record what is held; one last look for each while ctx allows.
		drain:
			for {
				select {
				case it := <-f.ch:
					waiting = append(waiting, it)
				default:
					break drain
				}
			}
			for _, it := range waiting {
				if ctx.Err() == nil {
					it.attempt = len(fetchDelays) - 1 // the last one
					f.attempt(ctx, it)
				} else {
					f.finish(it)
				}
			}
			return
		}
	}
}

// fetchQueue is a min-heap of fetch items by due time.
type fetchQueue []*fetchItem

func (q fetchQueue) Len() int           { return len(q) }
func (q fetchQueue) Less(i, j int) bool { return q[i].due.Before(q[j].due) }
func (q fetchQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *fetchQueue) Push(x any)        { *q = append(*q, x.(*fetchItem)) }
func (q *fetchQueue) Pop() any {
	old := *q
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return it
}

// attempt asks the node once and reports whether it is done with it (recorded).
func (f *fetcher) attempt(ctx context.Context, it *fetchItem) bool {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	evs, complete, err := f.ask(ctx, it.id)
	cancel()
	if err != nil {
		f.failed.Add(1)
		f.log.Debug().Err(err).Str("session_id", it.s.ID).Int("attempt", it.attempt).Msg("fetch node events")
	} else {
		it.events = evs
	}
	it.attempt++
	if complete || it.attempt >= len(fetchDelays) {
		f.finish(it)
		return true
	}
	it.due = time.Now().Add(fetchDelays[it.attempt])
	return false
}

func (f *fetcher) finish(it *fetchItem) {
	it.s.Events = mergeNodeEvents(it.s.Events, it.events)
	f.record(it.s)
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

// ask calls the source, and gives up when ctx is done even if the source does not: a
// driver blocked in a write to a node that does not read would otherwise hold the fetcher,
// the sessions it holds, and the Tracer's Close. The abandoned call ends on its own.
func (f *fetcher) ask(ctx context.Context, id [16]byte) ([]Event, bool, error) {
	type answer struct {
		evs      []Event
		complete bool
		err      error
	}
	ch := make(chan answer, 1)
	go func() {
		evs, complete, err := f.src.Events(ctx, id)
		ch <- answer{evs, complete, err}
	}()
	select {
	case a := <-ch:
		return a.evs, a.complete, a.err
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
}
