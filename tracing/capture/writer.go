package capture

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"hash/maphash"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/tracecar/tracecar/internal/capturefile"
	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/tracing"
)

// The writer: one goroutine per capture, which drains the queue every drainEvery (so that
// a request never wakes it: the data path's send finds no receiver waiting), turns each
// Record into a file record, and flushes a chunk every flushEvery.
const (
	drainEvery = 50 * time.Millisecond
	flushEvery = time.Second
	// schemaTimeout bounds one read of the schema from the node.
	schemaTimeout = 5 * time.Second
)

// owner is what a writer needs of its Capture, which is above it: its configuration and
// logger, its running Session (cleared at the stop), and ended, told once the file is
// complete or removed.
type owner struct {
	cfg    Config
	log    *zerolog.Logger
	active *atomic.Pointer[Session]
	ended  func(*writer, Result)
}

type writer struct {
	owner
	s       *Session
	opts    Options
	started time.Time
	final   string // the file's name once complete
	partial string // its name while written
	f       *os.File
	bw      *bufio.Writer
	w       *capturefile.Writer
	mac     hash.Hash
	key     []byte
	keep    bool
	sum     []byte
	// hashes caches the keyed hashes of recent keys, in memory only: a hot key is hashed
	// once, and HMAC-SHA256 is most of the writer's work per request. It is direct-mapped
	// by a 64-bit fingerprint of the key's values (maphash, seeded per capture), and holds
	// no pointer, so that the collector never scans it.
	hashes []hashEntry
	seed   maphash.Seed
	hkey   []byte
	rec    capturefile.Record

	records atomic.Uint64
	bytes   atomic.Int64

	stopOnce sync.Once
	stopCh   chan string // the reason

	st catalog
}

func newWriter(c owner, final string, o Options, key []byte, started time.Time) (*writer, error) {
	partial := final + ".partial"
	f, err := os.OpenFile(partial, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%w %s: create the capture file: %v", ErrDir, c.cfg.Dir, err)
	}
	w := &writer{
		owner: c, opts: o, started: started, final: final, partial: partial, f: f,
		bw: bufio.NewWriterSize(f, 256<<10), key: key, mac: hmac.New(sha256.New, key),
		keep: o.Values == capturefile.ValuesKeep, stopCh: make(chan string, 1),
	}
	w.s = &Session{start: tracing.Now(), queue: newRing(QueueSize),
		free: newRing(freeSize), done: make(chan struct{})}
	fail := func(err error) (*writer, error) {
		f.Close()
		os.Remove(partial)
		return nil, fmt.Errorf("%w %s: write the capture file: %v", ErrDir, c.cfg.Dir, err)
	}
	if w.w, err = capturefile.NewWriter(w.bw); err != nil {
		return fail(err)
	}
	w.st.init(w.keep, w.cfg.Statements, w.keyHash, w.schemaTable, w.w)
	h := capturefile.Header{TracecarVersion: Version(), StartedAt: started, Values: o.Values, Node: c.cfg.Node,
		DurationMS: o.Duration.Milliseconds(), MaxBytes: o.MaxBytes}
	if err := w.w.Header(h); err != nil {
		return fail(err)
	}
	if err := w.flush(); err != nil {
		return fail(err)
	}
	return w, nil
}

// stop asks the writer to end, with reason; the first reason given wins.
func (w *writer) stop(reason string) {
	w.stopOnce.Do(func() {
		// New requests are no longer captured from now on; those queued are written.
		w.active.CompareAndSwap(w.s, nil)
		w.stopCh <- reason
	})
}

func (w *writer) flush() error {
	if err := w.w.Flush(); err != nil {
		return err
	}
	err := w.bw.Flush()
	w.bytes.Store(w.w.Written())
	return err
}

func (w *writer) run() {
	defer close(w.s.done)
	tick := time.NewTicker(drainEvery)
	defer tick.Stop()
	deadline := time.NewTimer(w.opts.Duration)
	defer deadline.Stop()
	lastFlush := time.Now()
	var err error
	reason := ""
	for reason == "" && err == nil {
		select {
		case <-tick.C:
			reason, err = w.drain()
			if err == nil && time.Since(lastFlush) >= flushEvery {
				err = w.flush()
				lastFlush = time.Now()
			}
		case <-deadline.C:
			w.stop("duration")
		case reason = <-w.stopCh:
		}
	}
	if reason != "" && err == nil {
		w.stop(reason)
		// What the data path queued before the stop is written, up to the size limit.
		if r, derr := w.drain(); derr != nil {
			err = derr
		} else if r != "" {
			reason = r
		}
	}
	w.finish(reason, err)
}

// drain writes every Record queued, and returns a reason to stop when the file reached
// its size limit.
func (w *writer) drain() (string, error) {
	for {
		r := w.s.queue.pop()
		if r == nil {
			return "", nil
		}
		err := w.write(r)
		w.s.release(r)
		if err != nil {
			return "", err
		}
		if w.w.Written()+int64(w.w.Pending()) >= w.opts.MaxBytes {
			w.stop("max_bytes")
			return "max_bytes", nil
		}
	}
}

// finish writes the end entry and renames the file, or removes it on error, and tells the
// Capture.
func (w *writer) finish(reason string, err error) {
	res := Result{File: w.final, Values: w.opts.Values, EndedAt: time.Now().UTC(), Reason: reason,
		Records: w.records.Load(), Dropped: w.s.dropped.Load()}
	if err == nil {
		err = w.w.End(capturefile.End{EndedAt: res.EndedAt, Reason: reason, Records: res.Records, Dropped: res.Dropped})
	}
	if err == nil {
		err = w.flush()
	}
	if err == nil {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(w.partial, w.final)
	}
	res.Bytes = w.w.Written()
	if err != nil {
		// Nothing half-written is left behind: a file that cannot be completed goes.
		os.Remove(w.partial)
		res.Error, res.Reason = err.Error(), "error"
		res.File = ""
	}
	w.s.ended.Store(true)
	clear(w.key)
	w.mac.Reset()
	w.hashes = nil
	w.ended(w, res)
}

// write turns one Record into a file record.
func (w *writer) write(r *Record) error {
	rec := &w.rec
	*rec = capturefile.Record{
		AtUS: (r.at - w.s.start) / 1000, Conn: r.conn, Opcode: byte(r.op), Flags: r.flags, ProtocolVersion: r.version,
		Consistency: -1, Serial: -1, PageSize: -1, BatchType: -1,
		RespOpcode: byte(r.respOp), Rows: r.rows, LatencyUS: max(r.latency, 0) / 1000,
		ReqBytes: r.reqLen, RespBytes: r.respLen,
	}
	if r.ks != nil {
		rec.Keyspace = *r.ks
	}
	switch r.respOp {
	case cql.OpResult:
		rec.ResultKind = r.kind
	case cql.OpError:
		rec.ErrorCode = r.kind
	}
	if err := w.st.parts(r, rec); err != nil {
		return err
	}
	err := w.w.Record(rec, w.keep)
	if errors.Is(err, capturefile.ErrValueTooLong) {
		// A record of huge kept values: its values are left out, not the record.
		for i := range rec.Parts {
			rec.Parts[i].Values = nil
		}
		err = w.w.Record(rec, false)
	}
	if err != nil {
		return err
	}
	w.records.Add(1)
	return nil
}

// hashSlots is the size of the cache of keyed hashes: 1 MiB.
const hashSlots = 1 << 16

type hashEntry struct {
	fp uint64 // the fingerprint of the key's values; 0 for an empty slot
	h  [capturefile.KeyLen]byte
}

// keyHash appends the keyed hash of a partition key made of vals to dst.
func (w *writer) keyHash(dst []byte, vals [][]byte) []byte {
	w.hkey = w.hkey[:0]
	for _, v := range vals {
		w.hkey = append(w.hkey, byte(len(v)>>8), byte(len(v)))
		w.hkey = append(w.hkey, v...)
	}
	if w.hashes == nil {
		w.hashes, w.seed = make([]hashEntry, hashSlots), maphash.MakeSeed()
	}
	fp := maphash.Bytes(w.seed, w.hkey) | 1
	e := &w.hashes[fp&(hashSlots-1)]
	if e.fp != fp {
		w.mac.Reset()
		w.mac.Write(w.hkey)
		w.sum = w.mac.Sum(w.sum[:0])
		e.fp = fp
		copy(e.h[:], w.sum)
	}
	return append(dst, e.h[:]...)
}

// schemaTable returns the table's schema, reading it from the node and writing its entries
// (and its keyspace's) the first time.
func (w *writer) schemaTable(ks, table string) *capturefile.Table {
	key := ks + "." + table
	if t, ok := w.st.tables[key]; ok {
		return t
	}
	t := &capturefile.Table{Keyspace: ks, Name: table}
	w.st.tables[key] = t
	src := w.cfg.Schema
	if src == nil {
		t.Error = "no node connection to read the schema"
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), schemaTimeout)
		if !w.st.keyspaces[ks] {
			w.st.keyspaces[ks] = true
			k, err := src.Keyspace(ctx, ks)
			if err != nil {
				k = capturefile.Keyspace{Name: ks, Error: err.Error()}
			}
			w.w.Keyspace(k)
		}
		got, err := src.Table(ctx, ks, table)
		cancel()
		if err != nil {
			t.Error = err.Error()
		} else {
			*t = got
		}
	}
	if t.Error != "" {
		w.log.Warn().Str("table", key).Str("error", t.Error).Msg("capture: the schema of a touched table is unknown")
	}
	w.w.Table(*t)
	return t
}
