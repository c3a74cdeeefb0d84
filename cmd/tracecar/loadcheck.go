package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/tracecar/tracecar/ctl"
	"github.com/tracecar/tracecar/loadcheck"
	"github.com/tracecar/tracecar/logs"
	"github.com/tracecar/tracecar/tracing"
)

func runLoadcheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := loadcheck.ParseFlags(args, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case err != nil:
		fmt.Fprintf(stderr, "tracecar loadcheck: %v\n", err)
		return exitUsage
	}
	cfg.Out = stdout
	cfg.Progress = isTerminal(stdout)

	if cfg.Node == "" {
		// The embedded default: a node and a sidecar in this process. Their logs go to a
		// file, as on a production node, so that the debug mode pays for real writes.
		dir, err := os.MkdirTemp("", "tracecar-loadcheck-")
		if err != nil {
			fmt.Fprintf(stderr, "tracecar loadcheck: %v\n", err)
			return exitRuntime
		}
		defer os.RemoveAll(dir)
		logFile := filepath.Join(dir, "tracecar.log")
		reg, err := logs.New(logs.Config{Format: "json", File: logFile, Writer: stderr})
		if err != nil {
			fmt.Fprintf(stderr, "tracecar loadcheck: %v\n", err)
			return exitRuntime
		}
		defer reg.Close()
		st, err := startStack(ctx, stackConfig{Listen: "127.0.0.1:0", Admin: "127.0.0.1:0", RingSize: tracing.DefaultRingSize}, reg, stdout)
		if err != nil {
			fmt.Fprintf(stderr, "tracecar loadcheck: %v\n", err)
			return exitRuntime
		}
		defer st.stop()
		fmt.Fprintf(stdout, "tracecar: started an in-process sidecar on %s (admin %s); logs go to %s\n", st.Sidecar, st.Admin, logFile)
		cfg.Node, cfg.Sidecar, cfg.Admin, cfg.NodeAPI = st.Node, st.Sidecar, st.Admin, st.NodeAPI
		cfg.Embedded = true
	}

	_, err = loadcheck.Run(ctx, cfg)
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, loadcheck.ErrGuardrail):
		fmt.Fprintf(stderr, "tracecar loadcheck: %v\n", err)
		return exitGuardrail
	case errors.Is(err, loadcheck.ErrUsage):
		fmt.Fprintf(stderr, "tracecar loadcheck: %v\n", err)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "tracecar loadcheck: %v\n", err)
		return exitRuntime
	}
}

func runCtl(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return ctl.Run(ctx, args, stdout, stderr)
}

// isTerminal reports whether w is a character device, such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
