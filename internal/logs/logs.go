// Package logs is tracecar's registry of named zerolog loggers whose levels change at
// runtime, as ScyllaDB's /system/logger does for its loggers.
//
// Each named logger is an ordinary *zerolog.Logger that never changes: callers fetch it once
// and keep it, also on hot paths. Its level is an atomic value owned by the registry and
// consulted by a zerolog Sampler, which zerolog asks before it allocates or encodes an
// event. A disabled level therefore costs one atomic load and no allocation, and a level
// change is seen by every holder of the logger, including loggers derived from it with
// With(), at their next call.
package logs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"
)

// Names of the loggers that every registry has, in the order Names lists them.
const (
	Sidecar   = "sidecar"
	Tracing   = "tracing"
	SlowLog   = "slowlog"
	Admin     = "admin"
	Node      = "node"
	LoadCheck = "loadcheck"
)

// DefaultNames are the loggers created by New.
var DefaultNames = []string{Sidecar, Tracing, SlowLog, Admin, Node, LoadCheck}

// Levels are the accepted level names, from the most to the least severe.
var Levels = []string{"error", "warn", "info", "debug", "trace"}

var (
	// ErrUnknownLogger is returned for a logger name that the registry does not have.
	ErrUnknownLogger = errors.New("unknown logger")
	// ErrBadLevel is returned for a level that is not one of Levels.
	ErrBadLevel = errors.New("bad level: allowed are error, warn, info, debug, trace")
)

// Config configures a Registry. The zero value writes console lines to stderr at level info.
type Config struct {
	// Format is "console" (the default, human-readable) or "json" (one object a line).
	Format string
	// Writer receives the log lines; nil means os.Stderr. File takes precedence over it.
	Writer io.Writer
	// File, when set, is a file that log lines are appended to; it is created if needed.
	File string
	// Level is the initial level of every logger; empty means "info".
	Level string
}

// Registry holds the named loggers. It is safe for concurrent use. A nil *Registry hands
// out disabled loggers and reports no names, so that code under test can run without one.
type Registry struct {
	base zerolog.Logger // carries the writer and the timestamp; level trace, no sampler
	out  swapWriter     // where base writes: replaced by Reopen

	fileMu sync.Mutex
	close  io.Closer // the log file, if the registry opened one

	mu      sync.Mutex
	names   []string
	loggers map[string]*entry
	def     zerolog.Level // the level given to loggers created later
}

// entry is one named logger and its level.
type entry struct {
	level  levelSampler
	logger zerolog.Logger
}

// levelSampler is a zerolog.Sampler that lets through the events at or above its level.
// zerolog consults the sampler in Logger.should, before it takes an event from its pool,
// which is what makes a disabled level free.
type levelSampler struct{ lvl atomic.Int32 }

// Sample reports whether an event at lvl is enabled.
func (s *levelSampler) Sample(lvl zerolog.Level) bool {
	return int32(lvl) >= s.lvl.Load()
}

// ParseLevel parses one of Levels, in any case.
func ParseLevel(s string) (zerolog.Level, error) {
	switch strings.ToLower(s) {
	case "error":
		return zerolog.ErrorLevel, nil
	case "warn":
		return zerolog.WarnLevel, nil
	case "info":
		return zerolog.InfoLevel, nil
	case "debug":
		return zerolog.DebugLevel, nil
	case "trace":
		return zerolog.TraceLevel, nil
	}
	return zerolog.NoLevel, fmt.Errorf("%q: %w", s, ErrBadLevel)
}

// levelName is the inverse of ParseLevel.
func levelName(l zerolog.Level) string {
	switch l {
	case zerolog.ErrorLevel:
		return "error"
	case zerolog.WarnLevel:
		return "warn"
	case zerolog.InfoLevel:
		return "info"
	case zerolog.DebugLevel:
		return "debug"
	case zerolog.TraceLevel:
		return "trace"
	}
	return l.String()
}

// New builds a registry with the DefaultNames loggers, writing to cfg's destination. It
// fails on a bad Format or Level, or when File cannot be opened.
func New(cfg Config) (*Registry, error) {
	lvl := zerolog.InfoLevel
	if cfg.Level != "" {
		var err error
		if lvl, err = ParseLevel(cfg.Level); err != nil {
			return nil, err
		}
	}
	r := &Registry{loggers: make(map[string]*entry), def: lvl}
	w, f, err := destination(cfg)
	if err != nil {
		return nil, err
	}
	r.out.w.Store(&w)
	if f != nil {
		r.close = f
	}
	r.base = zerolog.New(&r.out).Level(zerolog.TraceLevel).With().Timestamp().Logger()
	for _, n := range DefaultNames {
		r.add(n)
	}
	return r, nil
}

// TimeFormat is the time of every log line, console or JSON: RFC 3339 with microseconds,
// so that a line can be matched to the node's logs and to the API's nanosecond times.
const TimeFormat = "2006-01-02T15:04:05.000000Z07:00"

// zerolog reads the time format from a variable of its package, the one global that this
// package owns; it is set before main runs, so that no logger ever reads it while it is
// written.
func init() { zerolog.TimeFieldFormat = TimeFormat }

// destination returns the writer that cfg's Format and File (or Writer) make, and the file
// it opened, if any.
func destination(cfg Config) (io.Writer, *os.File, error) {
	w := cfg.Writer
	if w == nil {
		w = os.Stderr
	}
	color := cfg.File == "" && cfg.Writer == nil
	var f *os.File
	if cfg.File != "" {
		var err error
		if f, err = os.OpenFile(cfg.File, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err != nil {
			return nil, nil, fmt.Errorf("open log file: %w", err)
		}
		w = f
	}
	switch strings.ToLower(cfg.Format) {
	case "", "console":
		w = newConsoleWriter(w, !color, TimeFormat)
	case "json":
	default:
		if f != nil {
			f.Close()
		}
		return nil, nil, fmt.Errorf("log format %q: allowed are console, json", cfg.Format)
	}
	// Loggers share the writer; the lock keeps lines whole whatever the writer is.
	return zerolog.SyncWriter(w), f, nil
}

// swapWriter is the registry's writer, which Reopen replaces while loggers write.
type swapWriter struct{ w atomic.Pointer[io.Writer] }

func (s *swapWriter) Write(p []byte) (int, error) { return (*s.w.Load()).Write(p) }

// Reopen sends every logger's lines to the destination that cfg's Format and File (or
// Writer) name from now on, and closes the log file it opened before, if any: a SIGHUP
// after logrotate moved the file, or a new format. Levels stay as they are; cfg.Level is
// ignored. On error nothing changes. It is safe for concurrent use with logging.
func (r *Registry) Reopen(cfg Config) error {
	if r == nil {
		return nil
	}
	w, f, err := destination(cfg)
	if err != nil {
		return err
	}
	r.fileMu.Lock()
	defer r.fileMu.Unlock()
	r.out.w.Store(&w)
	old := r.close
	r.close = nil
	if f != nil {
		r.close = f
	}
	if old != nil {
		// A line being written to the old file now still has its descriptor until it returns.
		old.Close()
	}
	return nil
}

// add creates the logger called name. r.mu must be held, or r not yet shared.
func (r *Registry) add(name string) *entry {
	e := &entry{}
	e.level.lvl.Store(int32(r.def))
	e.logger = r.base.With().Str("logger", name).Logger().Sample(&e.level)
	r.loggers[name] = e
	r.names = append(r.names, name)
	return e
}

// nop is what a nil registry hands out.
var nop = zerolog.Nop()

// Logger returns the logger called name, always the same pointer for one name. A name that
// is not yet registered is added at the level last given to SetAll (or Config.Level), so
// that a package may bring its own logger; it then shows in Names and in the admin API.
//
// Do not call Sample or Level on the returned logger's copies expecting them to follow the
// registry: the registry's level is enforced by the logger's sampler, so a copy given
// another sampler, or zerolog.DisableSampling(true), escapes runtime level control.
func (r *Registry) Logger(name string) *zerolog.Logger {
	if r == nil {
		return &nop
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.loggers[name]
	if !ok {
		e = r.add(name)
	}
	return &e.logger
}

// Gate returns the level switch of the logger called name (adding the logger as Logger
// does). Code that logs on a path so hot that even zerolog's own disabled-level check
// (about 10 ns) matters guards its lines with it:
//
//	if gate.Enabled(zerolog.TraceLevel) {
//		log.Trace().Int("stream", s).Msg("frame")
//	}
//
// Enabled is one atomic load and a compare, and is inlined.
func (r *Registry) Gate(name string) Gate {
	if r == nil {
		return Gate{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.loggers[name]
	if !ok {
		e = r.add(name)
	}
	return Gate{&e.level}
}

// Gate tells whether a level of one logger is enabled now. The zero Gate enables nothing.
// It is safe for concurrent use.
type Gate struct{ s *levelSampler }

// Enabled reports whether an event at lvl would be written.
func (g Gate) Enabled(lvl zerolog.Level) bool {
	return g.s != nil && int32(lvl) >= g.s.lvl.Load()
}

// Valid reports whether g is a logger's gate, not the zero Gate.
func (g Gate) Valid() bool { return g.s != nil }

// lookup returns the entry called name, or ErrUnknownLogger.
func (r *Registry) lookup(name string) (*entry, error) {
	if r == nil {
		return nil, fmt.Errorf("%q: %w", name, ErrUnknownLogger)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.loggers[name]
	if !ok {
		return nil, fmt.Errorf("%q: %w", name, ErrUnknownLogger)
	}
	return e, nil
}

// Names returns the logger names, the DefaultNames first, in the order they were created.
func (r *Registry) Names() []string {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.names...)
}

// Level returns the level of the logger called name, as one of Levels.
func (r *Registry) Level(name string) (string, error) {
	e, err := r.lookup(name)
	if err != nil {
		return "", err
	}
	return levelName(zerolog.Level(e.level.lvl.Load())), nil
}

// SetLevel sets the level of the logger called name. It takes effect at the logger's next
// call, in every goroutine. An unknown name or a bad level changes nothing.
func (r *Registry) SetLevel(name, level string) error {
	lvl, err := ParseLevel(level)
	if err != nil {
		return err
	}
	e, err := r.lookup(name)
	if err != nil {
		return err
	}
	e.level.lvl.Store(int32(lvl))
	return nil
}

// SetAll sets the level of every logger, and of loggers created later.
func (r *Registry) SetAll(level string) error {
	lvl, err := ParseLevel(level)
	if err != nil {
		return err
	}
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.def = lvl
	for _, e := range r.loggers {
		e.level.lvl.Store(int32(lvl))
	}
	return nil
}

// Close closes the log file if the registry opened one. Loggers stay usable, but their
// lines to a closed file are lost.
func (r *Registry) Close() error {
	if r == nil {
		return nil
	}
	r.fileMu.Lock()
	defer r.fileMu.Unlock()
	if r.close == nil {
		return nil
	}
	return r.close.Close()
}
