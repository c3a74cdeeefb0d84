// Package capture records the shape of the workload that crosses a sidecar into a capture
// file (internal/capturefile), for `tracecar loadcheck --workload replay:FILE`: one record
// per request, with its statement, parameters, the types and lengths of its values, a
// keyed hash of its partition key, and what the response said, plus the schema of every
// table touched.
//
// A Capture is off until Start, and then costs the data path one atomic load per request
// (Active) while off. While on, the sidecar hands each request and its response to the
// Session (Request, Response), which copies what it needs from the frame's view into a
// reused Record and queues it; a writer goroutine does the rest: it resolves statements,
// hashes keys, reads the schema through the node, and writes the file. The queue is
// bounded: when it is full a request is dropped and counted, never waited for.
//
// By default (values=shape) no value is ever written: a partition key becomes an
// HMAC-SHA256 under a key drawn at random for the capture and forgotten at its end.
// values=keep writes the bound values, and says so in a warning and in the status.
//
// # Layers
//
// The files of the package are layers: a file uses declarations of the files below it,
// never of one above it (ci.TestFilesPointDown fails on a cycle, and prints it). From the
// ground up:
//
//	config.go      Config, Options, Status, Result, the errors; the capture directory's check
//	session.go     the data path: Record, Session, and the lock-free ring of Records
//	statements.go  what the writer knows of the statements it has met (catalog)
//	writer.go      the writer: its goroutine, its file, the keyed hashes, the schema read
//	capture.go     the Capture: Start, Stop, Close, Status
package capture

import (
	"context"
	"crypto/rand"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/internal/capturefile"
)

// Capture is a sidecar's workload capture. Create it with New; it is safe for concurrent
// use.
type Capture struct {
	cfg    Config
	log    *zerolog.Logger
	active atomic.Pointer[Session]

	mu   sync.Mutex // serialises Start and Stop
	cur  *writer    // the running capture's writer, under mu
	last *Result
	// lastMu guards last for the writer, which sets it at the end.
	lastMu sync.Mutex
}

var nopLogger = zerolog.Nop()

// New returns a Capture for cfg, off.
func New(cfg Config) *Capture {
	c := &Capture{cfg: cfg, log: cfg.Logger}
	if c.log == nil {
		c.log = &nopLogger
	}
	return c
}

// Active returns the running capture's Session, or nil: one atomic load, the whole cost
// of a capture that is off.
func (c *Capture) Active() *Session { return c.active.Load() }

// Start starts a capture with o, or returns an error and starts nothing: ErrInvalid,
// ErrNoDir, ErrRunning, or ErrDir when the file cannot be created.
func (c *Capture) Start(o Options) (Status, error) {
	if err := checkOptions(&o); err != nil {
		return Status{}, err
	}
	if c.cfg.Dir == "" {
		return Status{}, ErrNoDir
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur != nil {
		return Status{}, ErrRunning
	}
	started := time.Now().UTC()
	key := make([]byte, 32)
	rand.Read(key)
	name := "tracecar-" + started.Format("20060102T150405.000Z") + "-" + strings.ToLower(rand.Text()[:6]) + ".tcap"
	final := filepath.Join(c.cfg.Dir, name)
	w, err := newWriter(owner{c.cfg, c.log, &c.active, c.ended}, final, o, key, started)
	if err != nil {
		return Status{}, err
	}
	c.cur = w
	c.active.Store(w.s)
	go w.run()
	ev := c.log.Info()
	if o.Values == capturefile.ValuesKeep {
		c.log.Warn().Str("file", final).Msg(KeepWarning)
		ev = c.log.Warn()
	}
	ev.Str("file", w.partial).Str("values", o.Values).Dur("duration", o.Duration).Int64("max_bytes", o.MaxBytes).Msg("capture started")
	return c.statusLocked(), nil
}

// Stop ends the running capture, waits until its file is complete (or ctx is done), and
// returns the status, whose Last says how it ended. Without a running capture it only
// returns the status.
func (c *Capture) Stop(ctx context.Context) (Status, error) {
	c.mu.Lock()
	w := c.cur
	c.mu.Unlock()
	if w == nil {
		return c.Status(), nil
	}
	w.stop("stopped")
	select {
	case <-w.s.done:
	case <-ctx.Done():
		return c.Status(), fmt.Errorf("stop capture: %w", ctx.Err())
	}
	return c.Status(), nil
}

// Close ends a running capture, as a shutdown, waiting for its file while ctx allows.
func (c *Capture) Close(ctx context.Context) error {
	c.mu.Lock()
	w := c.cur
	c.mu.Unlock()
	if w == nil {
		return nil
	}
	w.stop("shutdown")
	select {
	case <-w.s.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("close capture: %w", ctx.Err())
	}
}

// ended is called by a writer once its file is complete or removed.
func (c *Capture) ended(w *writer, res Result) {
	c.active.CompareAndSwap(w.s, nil)
	c.mu.Lock()
	if c.cur == w {
		c.cur = nil
	}
	c.lastMu.Lock()
	c.last = &res
	c.lastMu.Unlock()
	c.mu.Unlock()
	ev := c.log.Info()
	if res.Error != "" {
		ev = c.log.Error().Str("error", res.Error)
	}
	ev.Str("file", res.File).Str("reason", res.Reason).Uint64("records", res.Records).Uint64("dropped", res.Dropped).
		Int64("bytes", res.Bytes).Msg("capture ended")
}

// Status returns the capture's state.
func (c *Capture) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.statusLocked()
}

func (c *Capture) statusLocked() Status {
	st := Status{State: "off", Dir: c.cfg.Dir}
	c.lastMu.Lock()
	st.Last = c.last
	c.lastMu.Unlock()
	if w := c.cur; w != nil {
		st.State = "capturing"
		st.File = w.partial
		st.Values = w.opts.Values
		t := w.started
		st.StartedAt = &t
		st.DurationMS = w.opts.Duration.Milliseconds()
		st.MaxBytes = w.opts.MaxBytes
		st.Records = w.records.Load()
		st.Bytes = w.bytes.Load()
		st.Dropped = w.s.dropped.Load()
		if w.opts.Values == capturefile.ValuesKeep {
			st.Warning = KeepWarning
		}
	}
	return st
}
