package audit

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// errCancelled is add's error when the caller's wait ended before there was room.
var errCancelled = errors.New("audit record not queued")

// sinkQueue is one sink, its bounded queue, and the goroutine that writes the queue to the
// sink: it lets records gather for a moment, writes them in one batch, syncs the sink every
// Config.Sync (never per record), and retries a batch that failed, with the sink reported
// as failing (Log.Err) until it succeeds.
type sinkQueue struct {
	sink Sink
	log  *Log
	q    chan Record
	kick chan struct{} // a record was queued into an empty queue
	full chan struct{} // the queue is half full: write now

	written, dropped, waits, syncs atomic.Uint64
	state                          atomic.Pointer[failure] // nil while the sink works

	abandonOnce sync.Once
	abandoned   chan struct{} // closed when Close gives up on a failing sink
	abandon     atomic.Bool
	done        chan struct{}
	closeErr    error // set before done is closed
}

// failure is a failing sink's state.
type failure struct {
	err   string
	since time.Time
}

// add queues r, with the Log's adding lock held for reading. Under Block it waits for room until cancel (nil: for ever) or the Log's
// stop; under Drop it never waits.
func (q *sinkQueue) add(r Record, p Policy, cancel <-chan struct{}) error {
	if q.log.closed {
		q.dropped.Add(1)
		return ErrClosed
	}
	select {
	case q.q <- r:
		q.kicked()
		return nil
	default:
	}
	if p == Drop {
		q.dropped.Add(1)
		return nil
	}
	q.waits.Add(1)
	q.signal(q.full)
	select {
	case q.q <- r:
		q.kicked()
		return nil
	case <-cancel:
		q.dropped.Add(1)
		return errCancelled
	case <-q.log.stop:
		q.dropped.Add(1)
		return ErrClosed
	}
}

// kicked wakes the writer for the first record of a burst, and at once for a queue half
// full.
func (q *sinkQueue) kicked() {
	switch n := len(q.q); {
	case n == 1:
		q.signal(q.kick)
	case n >= cap(q.q)/2:
		q.signal(q.full)
	}
}

func (q *sinkQueue) signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// run is the sink's writer.
func (q *sinkQueue) run() {
	defer close(q.done)
	sync := time.NewTicker(q.log.cfg.Sync)
	defer sync.Stop()
	gather := time.NewTimer(flushDelay)
	gather.Stop()
	batch := make([]Record, 0, 256)
	dirty := false
	for {
		select {
		case <-q.kick:
			gather.Reset(flushDelay)
			select {
			case <-gather.C:
			case <-q.full:
				gather.Stop()
			case <-q.log.stop:
				gather.Stop()
			}
			dirty = q.drain(batch) || dirty
		case <-q.full:
			dirty = q.drain(batch) || dirty
		case <-sync.C:
			if dirty || len(q.q) > 0 {
				dirty = q.drain(batch) || dirty
				dirty = !q.sync()
			}
		case <-q.log.stop:
			<-q.log.sealed
			q.closeErr = q.close()
			return
		}
	}
}

// drain writes what is queued, in batches of up to cap(batch), and reports whether it
// wrote anything. A batch that fails is retried until it is written or Close abandons the
// sink.
func (q *sinkQueue) drain(batch []Record) bool {
	wrote := false
	for {
		batch = batch[:0]
	fill:
		for len(batch) < cap(batch) {
			select {
			case r := <-q.q:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		if len(batch) == 0 {
			return wrote
		}
		if !q.write(batch) {
			return wrote
		}
		wrote = true
	}
}

// write writes batch, retrying until it is written (true) or the sink is abandoned
// (false: the batch and the queue are dropped, counted).
func (q *sinkQueue) write(batch []Record) bool {
	for {
		err := q.sink.Write(context.Background(), batch)
		if err == nil {
			q.written.Add(uint64(len(batch)))
			q.recovered()
			return true
		}
		q.failed(err)
		if q.abandon.Load() {
			q.dropped.Add(uint64(len(batch) + q.discard()))
			return false
		}
		t := time.NewTimer(q.log.cfg.Retry)
		select {
		case <-t.C:
		case <-q.abandoned:
			t.Stop()
		}
	}
}

// giveUp is Close's: the sink's writer stops retrying.
func (q *sinkQueue) giveUp() {
	q.abandonOnce.Do(func() {
		q.abandon.Store(true)
		close(q.abandoned)
	})
}

// discard empties the queue and returns how many records it held.
func (q *sinkQueue) discard() int {
	n := 0
	for {
		select {
		case <-q.q:
			n++
		default:
			return n
		}
	}
}

// sync syncs the sink and reports whether it succeeded.
func (q *sinkQueue) sync() bool {
	if err := q.sink.Sync(context.Background()); err != nil {
		q.failed(err)
		return false
	}
	q.syncs.Add(1)
	q.recovered()
	return true
}

// close ends the writer: what is left is written (or dropped when abandoned), then the
// sink is closed, which syncs it.
func (q *sinkQueue) close() error {
	q.drain(make([]Record, 0, 256))
	if n := q.discard(); n > 0 { // only when abandoned: drain wrote the rest
		q.dropped.Add(uint64(n))
	}
	return q.sink.Close(context.Background())
}

// failed reports the sink as failing, logging the first failure of a run of them.
func (q *sinkQueue) failed(err error) {
	prev := q.state.Load()
	if prev != nil && prev.err == err.Error() {
		return
	}
	since := time.Now()
	if prev != nil {
		since = prev.since
	}
	q.state.Store(&failure{err: err.Error(), since: since})
	if prev == nil {
		q.log.cfg.Logger.Error().Str("sink", q.sink.Name()).Err(err).Str("policy", q.log.cfg.Policy.String()).
			Msg("audit sink failing: retrying")
	}
}

// recovered clears a failure, logging it.
func (q *sinkQueue) recovered() {
	if st := q.state.Load(); st != nil {
		q.state.Store(nil)
		q.log.cfg.Logger.Warn().Str("sink", q.sink.Name()).Time("failing_since", st.since).Msg("audit sink recovered")
	}
}
