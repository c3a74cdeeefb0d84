package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/loadcheck"
	"github.com/tracecar/tracecar/tracing"
)

// What the commands' flags share, below every command: the flag sets and their usage
// errors, the logging flags, the admin token's default and --trace-floor's value.

// errUsage marks an error in the command line. loadcheck.ErrUsage, for errors in a load
// check's configuration, is the same error.
var errUsage = loadcheck.ErrUsage

func usageErrorf(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errUsage}, a...)...)
}

// newFlagSet returns a flag set whose parse errors are usage errors.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("tracecar "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// logFlags are the logging flags shared by the long-running commands.
type logFlags struct {
	format, file, level *string
}

func addLogFlags(fs interface {
	String(name, value, usage string) *string
}) logFlags {
	return logFlags{
		format: fs.String("log-format", "console", "log format: console or json"),
		file:   fs.String("log-file", "", "append logs to this file instead of stderr"),
		level:  fs.String("log-level", "info", "initial level of every logger: error, warn, info, debug or trace"),
	}
}

func (f logFlags) registry(stderr io.Writer) (*logs.Registry, error) {
	if *f.format != "console" && *f.format != "json" {
		return nil, usageErrorf("--log-format must be console or json, got %q", *f.format)
	}
	if _, err := logs.ParseLevel(*f.level); err != nil {
		return nil, usageErrorf("--log-level: %v", err)
	}
	return logs.New(logs.Config{Format: *f.format, Writer: stderr, File: *f.file, Level: *f.level})
}

// tokenFromEnv sets an empty token from TRACECAR_ADMIN_TOKEN. The flag's default stays
// empty, so that a usage message never prints the token.
func tokenFromEnv(tok *string) {
	if *tok == "" {
		*tok = os.Getenv("TRACECAR_ADMIN_TOKEN")
	}
}

// floorFlag is --trace-floor: a duration from 1s to 7 days, or 0.
type floorFlag struct{ d *time.Duration }

func (f floorFlag) String() string {
	if f.d == nil || *f.d == 0 {
		return "0"
	}
	return f.d.String()
}

func (f floorFlag) Set(s string) error {
	if s == "0" {
		*f.d = 0
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < time.Second || d > tracing.MaxFloorInterval {
		return fmt.Errorf("want a duration from 1s to 168h such as 60s, or 0 for off")
	}
	*f.d = d
	return nil
}
