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
package capture

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/internal/buildinfo"
	"github.com/tracecar/tracecar/internal/capturefile"
	"github.com/tracecar/tracecar/tracing"
)

// Defaults and bounds of Options.
const (
	DefaultDuration = time.Minute
	MaxDuration     = 24 * time.Hour
	DefaultMaxBytes = 256 << 20
	MinMaxBytes     = 64 << 10
)

// KeepWarning is the warning of a capture with values=keep, logged and in its status.
const KeepWarning = "values=keep: the capture file holds the bound values of every request, which may be personal data or secrets; keep it as safe as the database itself"

// Errors of Start and Stop; the admin API maps them to statuses.
var (
	// ErrInvalid is a bad option.
	ErrInvalid = errors.New("invalid capture option")
	// ErrNoDir is a Start on a sidecar without a capture directory.
	ErrNoDir = errors.New("no capture directory: start the sidecar with --capture-dir DIR")
	// ErrRunning is a Start while a capture runs.
	ErrRunning = errors.New("a capture is running: stop it first (enable=false)")
	// ErrDir is a capture directory that cannot be used.
	ErrDir = errors.New("capture directory")
)

// SchemaSource reads the schema of what a capture touches from the node. Its methods are
// called from the writer goroutine only.
type SchemaSource interface {
	// Keyspace reads a keyspace from system_schema.keyspaces.
	Keyspace(ctx context.Context, name string) (capturefile.Keyspace, error)
	// Table reads a table's columns from system_schema.columns.
	Table(ctx context.Context, keyspace, table string) (capturefile.Table, error)
}

// Config configures a Capture. The zero value has no directory: Start fails with ErrNoDir.
type Config struct {
	// Dir is where capture files are written. CheckDir creates it with mode 0700; files
	// are created with mode 0600.
	Dir string
	// Statements is the sidecar's prepared-statement registry, for the text and the bound
	// variables of EXECUTEs. Nil captures prepared statements by id only.
	Statements *tracing.Statements
	// Schema reads the schema of touched tables. Nil writes tables without columns.
	Schema SchemaSource
	// Node is the node's address, for the header.
	Node string
	// Logger receives the start and end of captures and the values=keep warning. Nil
	// logs nothing.
	Logger *zerolog.Logger
}

// Options are the settings of one capture.
type Options struct {
	// Duration ends the capture; zero means DefaultDuration.
	Duration time.Duration
	// MaxBytes ends the capture once the file reaches it; zero means DefaultMaxBytes.
	MaxBytes int64
	// Values is capturefile.ValuesShape (the default, "") or capturefile.ValuesKeep.
	Values string
}

// Status is the state of the capture, as GET /tracecar/capture shows it.
type Status struct {
	// State is "capturing" or "off".
	State string `json:"state"`
	// Dir is the capture directory, "" when none is configured.
	Dir string `json:"dir"`
	// The running capture's file (while running, with the suffix .partial, renamed at its
	// end), policy, limits and counters.
	File       string     `json:"file,omitempty"`
	Values     string     `json:"values,omitempty"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	DurationMS int64      `json:"duration_ms,omitempty"`
	MaxBytes   int64      `json:"max_bytes,omitempty"`
	Records    uint64     `json:"records"`
	Bytes      int64      `json:"bytes"`
	Dropped    uint64     `json:"dropped"`
	Warning    string     `json:"warning,omitempty"`
	// Last is the capture that ended last.
	Last *Result `json:"last,omitempty"`
}

// Result is how a capture ended.
type Result struct {
	File    string    `json:"file"`
	Values  string    `json:"values"`
	EndedAt time.Time `json:"ended_at"`
	Reason  string    `json:"reason"`
	Records uint64    `json:"records"`
	Bytes   int64     `json:"bytes"`
	Dropped uint64    `json:"dropped"`
	// Error is set when the file could not be completed; it was then removed.
	Error string `json:"error,omitempty"`
}

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

// CheckDir creates dir with mode 0700 when it does not exist and checks that a file can be
// created in it, so that a sidecar started with a capture directory it cannot use fails at
// once, naming it, rather than at the first capture.
func CheckDir(dir string) error {
	if dir == "" {
		return ErrNoDir
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("%w %s: %v", ErrDir, dir, err)
	}
	f, err := os.CreateTemp(dir, ".tracecar-check-*")
	if err != nil {
		return fmt.Errorf("%w %s is not writable: %v", ErrDir, dir, err)
	}
	name := f.Name()
	f.Close()
	os.Remove(name)
	return nil
}

// Version returns the tracecar version written in capture headers: the module's version
// and VCS revision as the binary records them.
func Version() string {
	b := buildinfo.Read()
	v := "tracecar " + b.Version
	if r := b.ShortRevision(); r != "" {
		v += " " + r
	}
	return v
}

// checkOptions fills o's defaults and checks it.
func checkOptions(o *Options) error {
	switch {
	case o.Duration == 0:
		o.Duration = DefaultDuration
	case o.Duration < 0 || o.Duration > MaxDuration:
		return fmt.Errorf("%w: duration %v: want more than 0 and at most %v", ErrInvalid, o.Duration, MaxDuration)
	}
	switch {
	case o.MaxBytes == 0:
		o.MaxBytes = DefaultMaxBytes
	case o.MaxBytes < MinMaxBytes:
		return fmt.Errorf("%w: max_bytes %d: want at least %d", ErrInvalid, o.MaxBytes, MinMaxBytes)
	}
	switch o.Values {
	case "":
		o.Values = capturefile.ValuesShape
	case capturefile.ValuesShape, capturefile.ValuesKeep:
	default:
		return fmt.Errorf("%w: values %q: want shape or keep", ErrInvalid, o.Values)
	}
	return nil
}

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
	w, err := newWriter(c, final, o, key, started)
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
