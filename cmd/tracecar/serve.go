package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/tracecar/tracecar/internal/lifecycle"
	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/sidecar/handover"
)

// serveSidecar runs a sidecar: afresh, or taking over the one on the control socket
// (hf.takeover). Its stack, its signals (SIGHUP meanwhile, ctx's end) and its control
// socket, where a successor takes it over, are the actors of one lifecycle group.
func serveSidecar(ctx context.Context, cfg stackConfig, hf *handoverFlags, live *liveSettings, reg *logs.Registry, stdout io.Writer) error {
	log := reg.Logger(logs.Sidecar)
	if hf.takeover {
		in, err := takeover(ctx, cfg.controlSocket)
		switch {
		case errors.Is(err, errNoPredecessor):
			log.Warn().Err(err).Msg("--takeover: nothing to take over; starting afresh")
		case err != nil:
			return err
		default:
			cfg.inherit = in
		}
	}
	// Signals before the stack serves: a SIGHUP must not kill a process under a supervisor
	// that sends it early.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	st, err := newStack(ctx, cfg, reg, stdout)
	if err != nil {
		if cfg.inherit != nil {
			cfg.inherit.close() // the predecessor serves on
		}
		return err
	}
	fmt.Fprintf(stdout, "tracecar sidecar: CQL on %s -> node %s, admin API %s\n", st.Sidecar, st.Node, st.Admin)
	if st.ShardAware != "" {
		fmt.Fprintf(stdout, "tracecar sidecar: shard-aware port on %s\n", st.ShardAware)
	}
	if cfg.controlSocket == "" && hf.controlSocket != "none" {
		cfg.controlSocket, cfg.controlDefault = handover.DefaultControlPath(st.Sidecar), true
		st.ho.setControlSocket(cfg.controlSocket)
	}
	var g lifecycle.Group
	st.join(ctx, &g)
	joinSignals(ctx, &g, st, hup, live, stdout)
	ctl := handover.NewControlSocket()
	if in := cfg.inherit; in != nil {
		st.joinTakeover(ctx, &g, in, ctl, stdout)
	} else {
		st.joinControl(ctx, &g, cfg, ctl, stdout)
	}
	err = g.Run()
	ctl.Close()
	switch {
	case err != nil:
		return err
	case st.serverStopped.Load() && ctx.Err() == nil:
		return errors.New("a server stopped unexpectedly")
	}
	return nil
}

// joinSignals adds the actor of the process's signals to g: it serves SIGHUP on hup, and
// returns when ctx is done (SIGTERM, SIGINT), which stops the group.
func joinSignals(ctx context.Context, g *lifecycle.Group, st *stack, hup <-chan os.Signal, live *liveSettings, stdout io.Writer) {
	quit := make(chan struct{})
	g.Add(func() error {
		for {
			select {
			case <-hup:
				live.reload(st.reg)
			case <-ctx.Done():
				fmt.Fprintln(stdout, "tracecar sidecar: shutting down, draining in-flight requests")
				return nil
			case <-quit:
				if ctx.Err() != nil { // a server saw the signal first
					fmt.Fprintln(stdout, "tracecar sidecar: shutting down, draining in-flight requests")
				}
				return nil
			}
		}
	}, func(error) { close(quit) })
}
