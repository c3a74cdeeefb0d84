package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/internal/lifecycle"
	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/sidecar"
)

// The control socket, where a successor takes this process over (the giving side of the
// handover; takeover.go is the receiving side).

// handoverFlags are --control-socket and --takeover.
type handoverFlags struct {
	controlSocket string
	takeover      bool
}

func addHandoverFlags(fs *flag.FlagSet) *handoverFlags {
	f := &handoverFlags{}
	fs.StringVar(&f.controlSocket, "control-socket", "", "Unix `socket` (mode 0600) where a new process takes this one over with --takeover; \"none\" for none (default: tracecar-HOST-PORT.sock of --listen in $XDG_RUNTIME_DIR, else in the temporary folder)")
	fs.BoolVar(&f.takeover, "takeover", false, "take over the sidecar that serves --control-socket: its listeners, runtime state and connections, without dropping one; it exits once it has handed everything over (without one, start afresh)")
	return f
}

// check resolves the control socket's path into cfg.controlSocket ("" for none).
func (f *handoverFlags) check(cfg *stackConfig) error {
	switch {
	case f.controlSocket == "none":
		if f.takeover {
			return usageErrorf("--takeover needs a --control-socket, not none")
		}
		return nil
	case f.takeover && cfg.Node == "":
		return usageErrorf("--takeover needs --node: an embedded node lives in its process, and ends with it")
	case f.controlSocket != "":
		cfg.controlSocket = f.controlSocket
	default:
		_, port, err := net.SplitHostPort(cfg.Listen)
		if err != nil {
			return usageErrorf("--listen %q: %v", cfg.Listen, err)
		}
		if port == "0" {
			if f.takeover {
				return usageErrorf("--takeover with --listen on port 0 needs --control-socket: the default is named after the port")
			}
			return nil // named after the port bound, once bound (serveSidecar)
		}
		cfg.controlSocket, cfg.controlDefault = defaultControlSocket(cfg.Listen), true
	}
	if len(cfg.controlSocket) > 107 {
		return usageErrorf("--control-socket %q: a Unix socket path has at most 107 bytes", cfg.controlSocket)
	}
	return nil
}

// defaultControlSocket is the control socket of a sidecar listening on listen (host:port):
// tracecar-HOST-PORT.sock in $XDG_RUNTIME_DIR, else in the temporary folder.
func defaultControlSocket(listen string) string {
	host, port, _ := net.SplitHostPort(listen)
	if host == "" {
		host = "all"
	}
	dir := os.Getenv("XDG_RUNTIME_DIR")
	if dir == "" {
		dir = os.TempDir()
	}
	host = strings.NewReplacer(":", "_", "%", "_", "/", "_").Replace(host)
	return filepath.Join(dir, "tracecar-"+host+"-"+port+".sock")
}

// controlSocket is the control socket a sidecar serves, once it does. It is safe for
// concurrent use.
type controlSocket struct {
	handedOver chan struct{} // closed once a successor took this process over
	stopped    chan struct{} // closed by stop

	mu sync.Mutex
	ln *net.UnixListener
}

func newControlSocket() *controlSocket {
	return &controlSocket{handedOver: make(chan struct{}), stopped: make(chan struct{})}
}

// serve records ln as the socket served, and reports whether to serve it: not once stop
// was called.
func (c *controlSocket) serve(ln *net.UnixListener) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.stopped:
		return false
	default:
	}
	c.ln = ln
	return true
}

// stop ends the serving of the socket, which stays open (and its file in place) until close.
func (c *controlSocket) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	close(c.stopped)
	if c.ln != nil {
		c.ln.SetDeadline(time.Unix(1, 0))
	}
}

// close closes the socket, and removes its file unless a successor took it.
func (c *controlSocket) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ln == nil {
		return
	}
	select {
	case <-c.handedOver:
		c.ln.SetUnlinkOnClose(false) // the socket file is the successor's
	default:
		c.ln.SetUnlinkOnClose(true)
	}
	c.ln.Close()
}

// interrupt stops the serving of the socket once the stack has stopped: until then (while
// it drains) a successor may still take it over, as before the group.
func (c *controlSocket) interrupt(st *stack) {
	go func() {
		st.running.Wait()
		c.stop()
	}()
}

// joinControl listens on the control socket of a sidecar started afresh, and adds the
// actor that serves it to g. A socket that cannot be served is a warning, unless it was
// given with --control-socket: then its error stops the group.
func (st *stack) joinControl(ctx context.Context, g *lifecycle.Group, cfg stackConfig, ctl *controlSocket, stdout io.Writer) {
	log := st.reg.Logger(logs.Sidecar)
	if cfg.controlSocket != "" {
		l, err := sidecar.ListenControl(cfg.controlSocket)
		switch {
		case errors.Is(err, sidecar.ErrHandoverUnsupported):
			log.Warn().Err(err).Msg("no control socket: this process cannot be taken over")
			st.ho.setControlSocket("")
		case err != nil && cfg.controlDefault:
			log.Warn().Err(err).Str("control_socket", cfg.controlSocket).
				Msg("no control socket at the default path: this process cannot be taken over (give --control-socket PATH)")
			st.ho.setControlSocket("")
		case err != nil:
			g.Add(func() error { return err }, func(error) {})
			return
		default:
			ctl.serve(l)
			g.Add(func() error { return st.controlActor(ctx, l, ctl, stdout) }, func(error) { ctl.interrupt(st) })
		}
	}
	notifySupervisor("READY=1")
}

// serveControl serves the control socket: each new process that connects takes this one
// over, one at a time. When one has, it closes handedOver and returns. A handover that fails
// leaves this process serving on, and the socket open to the next.
func (st *stack) serveControl(ctx context.Context, ln *net.UnixListener, handedOver chan<- struct{}) {
	log := st.reg.Logger(logs.Sidecar)
	for {
		succ, err := sidecar.AcceptSuccessor(ln)
		if err != nil {
			return // stopped: the process is stopping (or the socket failed: it serves on without)
		}
		if err := st.handoff(ctx, succ, ln, log); err != nil {
			log.Warn().Err(err).Int("successor_pid", succ.Peer().PID).Msg("handover failed: this process serves on")
			continue
		}
		close(handedOver)
		return
	}
}

// controlActor is the execute of the control socket's actor: it serves ln, and returns
// nil once a successor took this process over, which stops the group, or once the group
// stopped it. A socket that fails to accept leaves the process serving on without one.
func (st *stack) controlActor(ctx context.Context, ln *net.UnixListener, ctl *controlSocket, stdout io.Writer) error {
	st.serveControl(ctx, ln, ctl.handedOver)
	select {
	case <-ctl.handedOver:
		if !st.stopping.Load() {
			fmt.Fprintln(stdout, "tracecar sidecar: handed over to the successor; exiting")
		}
	case <-ctl.stopped:
	}
	return nil
}

// handoff hands this process over to succ: it pauses the listeners and the admin API's
// changes, sends the listeners and the runtime state, and once the successor serves them,
// moves the connections. On failure it resumes what it paused.
func (st *stack) handoff(ctx context.Context, succ *sidecar.Successor, ctl *net.UnixListener, log *zerolog.Logger) error {
	defer succ.Close()
	if st.embedded {
		succ.Refuse("this sidecar runs an embedded node, which would end with it: take over one that runs with --node")
		return errors.New("refused: an embedded node")
	}
	peer := succ.Peer()
	log.Info().Int("successor_pid", peer.PID).Msg("handover: a new process takes this one over")
	st.ho.setGate(fmt.Sprintf("this sidecar (pid %d) is handing over to process %d: send changes to the new process once it serves", os.Getpid(), peer.PID))
	resume := func(err error) error {
		st.ho.setGate("")
		if rerr := errors.Join(st.cqlLn.Resume(), st.adminLn.Resume(), st.resumeShardAware()); rerr != nil {
			log.Error().Err(rerr).Msg("handover: could not resume accepting")
		}
		return err
	}
	cf, err := st.cqlLn.Pause()
	if err != nil {
		return resume(err)
	}
	af, err := st.adminLn.Pause()
	if err != nil {
		return resume(err)
	}
	files := []sidecar.ListenerFile{{Name: "cql", File: cf}, {Name: "admin", File: af}}
	if st.awareLn != nil {
		sf, err := st.awareLn.Pause()
		if err != nil {
			return resume(err)
		}
		files = append(files, sidecar.ListenerFile{Name: "shard-aware", File: sf})
	}
	ctlFile, err := ctl.File()
	if err != nil {
		return resume(err)
	}
	defer ctlFile.Close()
	state, err := json.Marshal(st.exportState())
	if err != nil {
		return resume(err)
	}
	offerCtx, cancel := context.WithTimeout(ctx, takeoverTimeout)
	err = succ.Offer(offerCtx, append(files, sidecar.ListenerFile{Name: "control", File: ctlFile}), state)
	cancel()
	if err != nil {
		return resume(fmt.Errorf("offer the listeners: %w", err))
	}
	st.api.StopTimers() // the successor runs them now, with their remaining time
	res, err := st.proxy.Handoff(ctx, succ, st.finalState)
	st.ho.count(res)
	if err != nil {
		return resume(err)
	}
	log.Info().Int("successor_pid", peer.PID).Int("moved", res.Moved).Int("closed", res.Closed).
		Msg("handed over: the successor serves the listeners and the connections; this process exits")
	return nil
}
