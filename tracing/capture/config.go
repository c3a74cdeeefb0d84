package capture

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/internal/buildinfo"
	"github.com/tracecar/tracecar/internal/capturefile"
	"github.com/tracecar/tracecar/tracing"
)

// What configures a capture and what it reports: Config, Options and their bounds, Status,
// Result, the errors of Start and Stop; the capture directory's check.

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
