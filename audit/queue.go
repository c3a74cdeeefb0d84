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
//
// The queue is a slice under a mutex, which the writer swaps for an empty one to take
// everything queued at once: an add copies its record once, into a slice that the writer
// reuses from its start (a channel would copy it in and out again, take its lock once per
// record on both sides, and cycle through a ring as large as the queue).
type sinkQueue struct {
	sink Sink
	cfg  *Config // the Log's
	// stop and sealed are the Log's: closed by Close, when blocked adds give up and the
	// writer gets ready to end, then once every queue is sealed.
	stop, sealed <-chan struct{}
	size         int           // Config.Queue: the most records queued before the policy applies
	kick         chan struct{} // a record was queued into an empty queue
	full         chan struct{} // the queue is half full: write now

	mu     sync.Mutex
	recs   []Record      // queued, at most size
	room   chan struct{} // made by an add that waits for room; closed when the writer takes recs
	closed bool          // set by Close: an add drops its record from then on
	spare  []Record      // the writer's: the slice swapped in next (take)

	written, dropped, waits, syncs atomic.Uint64
	wakeups                        atomic.Uint64           // the writer's rounds (run), for tests
	state                          atomic.Pointer[failure] // nil while the sink works

	abandonOnce sync.Once
	abandoned   chan struct{} // closed when Close gives up on a failing sink
	abandon     atomic.Bool
	done        chan struct{}
	closeErr    error // set before done is closed
}

// maxBatch is the most records given to one Sink.Write.
const maxBatch = 256

// failure is a failing sink's state.
type failure struct {
	err   string
	since time.Time
}

// add queues a copy of *r. Under Block it waits for room until cancel (nil: for ever) or
// the Log's stop; under Drop it never waits. Once Close has sealed the queue, r is dropped.
func (q *sinkQueue) add(r *Record, p Policy, cancel <-chan struct{}) error {
	waited := false
	q.mu.Lock()
	for {
		if q.closed {
			q.mu.Unlock()
			q.dropped.Add(1)
			return ErrClosed
		}
		if len(q.recs) < q.size {
			q.recs = append(q.recs, *r)
			n := len(q.recs)
			q.mu.Unlock()
			// Wake the writer for the first record of a burst, and at once for a queue half
			// full.
			switch {
			case n == 1:
				q.signal(q.kick)
			case n >= q.size/2:
				q.signal(q.full)
			}
			return nil
		}
		if p == Drop {
			q.mu.Unlock()
			q.dropped.Add(1)
			return nil
		}
		if q.room == nil {
			q.room = make(chan struct{})
		}
		room := q.room
		q.mu.Unlock()
		if !waited {
			waited = true
			q.waits.Add(1)
		}
		q.signal(q.full)
		select {
		case <-room:
		case <-cancel:
			q.dropped.Add(1)
			return errCancelled
		case <-q.stop:
			q.dropped.Add(1)
			return ErrClosed
		}
		q.mu.Lock()
	}
}

// seal makes every later add drop its record: Close's, once the Log is stopped, so that the
// writer's last drain leaves nothing queued behind it.
func (q *sinkQueue) seal() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
}

// queued returns how many records wait in the queue.
func (q *sinkQueue) queued() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.recs)
}

// take returns what is queued, leaving the spare slice in its place, and wakes the adds
// that wait for room. The writer gives the slice back with reuse once it is written.
func (q *sinkQueue) take() []Record {
	q.mu.Lock()
	recs := q.recs
	q.recs, q.spare = q.spare[:0], nil
	room := q.room
	q.room = nil
	q.mu.Unlock()
	if room != nil {
		close(room)
	}
	return recs
}

// reuse is the writer's, once recs (from take) are written or dropped: the slice is the next
// spare, cleared so that it keeps no string alive.
func (q *sinkQueue) reuse(recs []Record) {
	clear(recs)
	q.spare = recs[:0]
}

func (q *sinkQueue) signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// run is the sink's writer. Its sync timer runs only while records written since the last
// sync wait for one (dirty): an idle sink wakes nothing. A ticker woke every sink's writer
// every Config.Sync (a second by default) for the life of the process, with nothing to do.
func (q *sinkQueue) run() {
	defer close(q.done)
	sync := time.NewTimer(q.cfg.Sync)
	sync.Stop()
	syncing := false // sync is armed
	delay := gatherTime(q.cfg.Sync)
	gather := time.NewTimer(delay)
	gather.Stop()
	dirty := false
	for {
		if dirty && !syncing {
			sync.Reset(q.cfg.Sync)
			syncing = true
		}
		select {
		case <-q.kick:
			gather.Reset(delay)
			select {
			case <-gather.C:
			case <-q.full:
				gather.Stop()
			case <-q.stop:
				gather.Stop()
			}
			dirty = q.drain() || dirty
		case <-q.full:
			dirty = q.drain() || dirty
		case <-sync.C:
			syncing = false
			q.drain()
			dirty = !q.sync()
		case <-q.stop:
			<-q.sealed
			q.closeErr = q.close()
			return
		}
		q.wakeups.Add(1)
	}
}

// drain writes what is queued now, in batches of up to maxBatch, and reports whether it
// wrote anything. A batch that fails is retried until it is written or Close abandons the
// sink. The records queued while it writes wait for the writer's next round (the first of
// them kicked it), rather than follow at once in a tail of ever smaller writes: a round is
// one wake-up and one large write. But a queue left half full or more by a long write (a
// retry, a slow disk) is taken again at once, as it would wake the writer anyway, and so
// that a small queue does not stay full, dropping or holding records, for a round.
func (q *sinkQueue) drain() bool {
	wrote := false
	for {
		w, ok := q.drainOnce()
		wrote = wrote || w
		if !ok || 2*q.queued() < q.size {
			return wrote
		}
	}
}

// drainOnce writes what is queued now. It reports whether it wrote anything, and false
// for ok when the sink was abandoned.
func (q *sinkQueue) drainOnce() (wrote, ok bool) {
	recs := q.take()
	defer q.reuse(recs)
	for i := 0; i < len(recs); i += maxBatch {
		end := min(i+maxBatch, len(recs))
		if !q.write(recs[i:end]) {
			q.dropped.Add(uint64(len(recs) - end))
			return i > 0, false
		}
	}
	return len(recs) > 0, true
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
		t := time.NewTimer(q.cfg.Retry)
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
	recs := q.take()
	n := len(recs)
	q.reuse(recs)
	return n
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
	for q.drain() { // no add queues any more (seal): this ends
	}
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
		q.cfg.Logger.Error().Str("sink", q.sink.Name()).Err(err).Str("policy", q.cfg.Policy.String()).
			Msg("audit sink failing: retrying")
	}
}

// recovered clears a failure, logging it.
func (q *sinkQueue) recovered() {
	if st := q.state.Load(); st != nil {
		q.state.Store(nil)
		q.cfg.Logger.Warn().Str("sink", q.sink.Name()).Time("failing_since", st.since).Msg("audit sink recovered")
	}
}

// ErrClosed is returned by Submit once the Log is closed.
var ErrClosed = errors.New("audit log closed")
