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
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/sidecar"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/guardrail"
	"github.com/tracecar/tracecar/tracing/statements"
)

// The handover of a sidecar to a new process (README: Upgrade without dropping a
// connection): every sidecar serves a control socket; `tracecar sidecar --takeover`
// connects to it and receives, in order, the listeners (CQL, admin, and the control socket
// itself), the runtime state, and every plaintext connection (sidecar.Proxy.Handoff). The
// old process exits 0 once it has nothing left.

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

// inheritance is what a predecessor handed over: the listeners, the runtime state, and
// the connection to it, over which its client connections come next.
type inheritance struct {
	pred      *sidecar.Predecessor
	listeners map[string]net.Listener // cql, admin
	control   *net.UnixListener
	state     runtimeState
	at        time.Time
}

// listener returns the inherited listener called name, or listens on addr without one.
func (in *inheritance) listener(name, addr string) (net.Listener, error) {
	if in != nil {
		if ln := in.listeners[name]; ln != nil {
			delete(in.listeners, name)
			return ln, nil
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	return ln, nil
}

// close gives up what was inherited: the predecessor serves on.
func (in *inheritance) close() {
	for _, ln := range in.listeners {
		ln.Close()
	}
	in.control.Close()
	in.pred.Close()
}

// errNoPredecessor is a takeover with no process on the control socket.
var errNoPredecessor = errors.New("no sidecar serves the control socket")

// takeoverTimeout bounds the exchange up to the runtime state: a predecessor that does not
// answer in that time is not taken over.
const takeoverTimeout = 30 * time.Second

// takeover connects to the predecessor on the control socket at path and receives its
// listeners and runtime state.
func takeover(ctx context.Context, path string) (*inheritance, error) {
	ctx, cancel := context.WithTimeout(ctx, takeoverTimeout)
	defer cancel()
	pred, err := sidecar.DialPredecessor(ctx, path)
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
		return nil, fmt.Errorf("%w %s", errNoPredecessor, path)
	}
	if err != nil {
		return nil, err
	}
	files, raw, err := pred.Receive(ctx)
	if err != nil {
		pred.Close()
		return nil, fmt.Errorf("take over from process %d: %w", pred.Peer().PID, err)
	}
	in := &inheritance{pred: pred, listeners: map[string]net.Listener{}, at: time.Now()}
	for name, f := range files {
		ln, lerr := net.FileListener(f)
		f.Close()
		switch {
		case lerr != nil:
			err = errors.Join(err, fmt.Errorf("listener %s: %w", name, lerr))
		case name == "control":
			uln, ok := ln.(*net.UnixListener)
			if !ok {
				ln.Close()
				err = errors.Join(err, errors.New("the control listener is no Unix socket"))
				continue
			}
			in.control = uln
		default:
			in.listeners[name] = ln
		}
	}
	if err == nil {
		err = json.Unmarshal(raw, &in.state)
	}
	if err == nil && (in.listeners["cql"] == nil || in.listeners["admin"] == nil || in.control == nil) {
		err = errors.New("the predecessor did not hand over its cql, admin and control listeners")
	}
	if err != nil {
		in.close()
		return nil, fmt.Errorf("take over from process %d: %w", pred.Peer().PID, err)
	}
	return in, nil
}

// runtimeState is what can change at runtime, through the admin API or the guardrail, and
// so moves to the successor rather than being read from its flags.
type runtimeState struct {
	Tracing           tracing.ConfigState     `json:"tracing"`
	Filter            map[string]string       `json:"trace_filter,omitempty"`
	Loggers           map[string]string       `json:"loggers"`
	Guardrail         guardrail.State         `json:"guardrail"`
	StatementStats    bool                    `json:"statement_stats"`
	StatementPrepared []statements.Prepared   `json:"statement_prepared,omitempty"`
	Prepared          []tracing.PreparedEntry `json:"prepared,omitempty"`
}

// exportState returns the stack's runtime state.
func (st *stack) exportState() runtimeState {
	s := runtimeState{
		Tracing:           st.tracer.Config().State(),
		Filter:            st.tracer.Filter().Params(),
		Loggers:           map[string]string{},
		Guardrail:         st.guard.State(),
		StatementStats:    st.stmts.Enabled(),
		StatementPrepared: st.stmts.PreparedStatements(),
		Prepared:          st.tracer.Statements().Entries(),
	}
	for _, n := range st.reg.Names() {
		if l, err := st.reg.Level(n); err == nil {
			s.Loggers[n] = l
		}
	}
	return s
}

// finalState is what the old process sends once its connections have moved: the
// statement statistics it gathered, to the end (finalRuntime).
func (st *stack) finalState() []byte {
	b, _ := json.Marshal(finalRuntime{Statements: st.stmts.List("calls", 0, true)})
	return b
}

// finalRuntime is what counts until the end of a handover: the statement statistics (the
// successor has counted its own requests meanwhile, and adds these).
type finalRuntime struct {
	Statements []statements.Statement `json:"statements,omitempty"`
}

// restoreFinal adds what the predecessor counted to the end.
func (st *stack) restoreFinal(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	var f finalRuntime
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	st.stmts.Import(f.Statements)
	return nil
}

// restore installs the runtime state a predecessor handed over, before the stack serves:
// it wins over the flags, as the changes made through the admin API would have.
func (st *stack) restore(in *inheritance) error {
	if in == nil {
		return nil
	}
	s := in.state
	if err := st.tracer.SetConfig(s.Tracing.Config()); err != nil {
		return fmt.Errorf("inherited tracing configuration: %w", err)
	}
	if err := st.guard.Restore(s.Guardrail); err != nil {
		return fmt.Errorf("inherited guardrail: %w", err)
	}
	if s.Filter != nil {
		f, err := tracing.ParseFilter(s.Filter)
		if err != nil {
			return fmt.Errorf("inherited trace filter: %w", err)
		}
		st.tracer.SetFilter(f)
	}
	for name, level := range s.Loggers {
		st.reg.Logger(name)
		if err := st.reg.SetLevel(name, level); err != nil {
			return fmt.Errorf("inherited logger %s: %w", name, err)
		}
	}
	st.stmts.SetEnabled(s.StatementStats)
	st.stmts.LearnPrepared(s.StatementPrepared)
	reg := st.tracer.Statements()
	for _, e := range s.Prepared {
		reg.Put(e.ID, e.Statement)
	}
	return nil
}

// handoverState is what /tracecar/status and /metrics say of handovers, and the admin
// API's write gate while one runs. It is safe for concurrent use.
type handoverState struct {
	st            *stack
	controlSocket string
	schedPolicy   string
	conns         *prometheus.CounterVec

	mu       sync.Mutex
	gate     string // non-empty: the admin API refuses changes, with this reason
	pred     *admin.ProcessPeer
	received *admin.Handover
}

func newHandoverState(st *stack, cfg stackConfig) *handoverState {
	h := &handoverState{st: st, controlSocket: cfg.controlSocket, schedPolicy: cfg.schedPolicy,
		conns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tracecar_handover_connections_total",
			Help: "Client connections of handovers to a new process: moved (taken over by this process from its predecessor, or by the successor from this one), or closed instead (TLS, or not quiet within --drain-timeout)."},
			[]string{"outcome"})}
	h.conns.WithLabelValues("moved")
	h.conns.WithLabelValues("closed")
	if in := cfg.inherit; in != nil {
		p := in.pred.Peer()
		h.pred = &admin.ProcessPeer{PID: p.PID, StartedAt: p.StartedAt}
		h.received = &admin.Handover{At: in.at}
	}
	return h
}

func (h *handoverState) adminOptions() []admin.Option {
	accepted := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tracecar_client_connections_accepted_total",
		Help: "Client connections this process accepted (those taken over from a predecessor are in tracecar_handover_connections_total)."},
		func() float64 { return float64(h.st.proxy.Accepted()) })
	return []admin.Option{admin.WithProcess(h.process), admin.WithWriteGate(h.writeGate),
		admin.WithCollector(h.conns), admin.WithCollector(accepted)}
}

func (h *handoverState) process() admin.Process {
	self := sidecar.Self()
	h.mu.Lock()
	defer h.mu.Unlock()
	p := admin.Process{PID: self.PID, StartedAt: self.StartedAt, ControlSocket: h.controlSocket, Predecessor: h.pred,
		SchedPolicy: h.schedPolicy}
	if h.received != nil {
		r := *h.received
		if !r.Done && r.Received == 0 {
			r.Received = int(h.st.proxy.Adopted()) // so far
		}
		p.Handover = &r
	}
	return p
}

func (h *handoverState) writeGate() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gate != "" {
		return errors.New(h.gate)
	}
	return nil
}

func (h *handoverState) setControlSocket(path string) {
	h.mu.Lock()
	h.controlSocket = path
	h.mu.Unlock()
}

func (h *handoverState) setGate(reason string) {
	h.mu.Lock()
	h.gate = reason
	h.mu.Unlock()
}

// asked records that this process, serving, asks for the predecessor's connections.
func (h *handoverState) asked() {
	h.mu.Lock()
	h.received.ConnectionsFrom = time.Now()
	h.mu.Unlock()
}

// adopted records the end of the takeover of the predecessor's connections.
func (h *handoverState) adopted(res sidecar.HandoffResult, done bool) {
	h.mu.Lock()
	h.received.Received, h.received.ClosedByPredecessor, h.received.Done = res.Moved, res.Closed, done
	h.received.ConnectionsTo = time.Now()
	h.mu.Unlock()
	h.count(res)
}

// connectionsTook is how long the connections took to arrive.
func (h *handoverState) connectionsTook() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.received.ConnectionsTo.Sub(h.received.ConnectionsFrom)
}

func (h *handoverState) count(res sidecar.HandoffResult) {
	h.conns.WithLabelValues("moved").Add(float64(res.Moved))
	h.conns.WithLabelValues("closed").Add(float64(res.Closed))
}

// serveSidecar runs a sidecar: afresh, or taking over the one on the control socket
// (hf.takeover); it serves the control socket for its own successor, and SIGHUP.
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
	st, err := startStack(ctx, cfg, reg, stdout)
	if err != nil {
		if cfg.inherit != nil {
			cfg.inherit.close() // the predecessor serves on
		}
		return err
	}
	fmt.Fprintf(stdout, "tracecar sidecar: CQL on %s -> node %s, admin API %s\n", st.Sidecar, st.Node, st.Admin)
	if cfg.controlSocket == "" && hf.controlSocket != "none" {
		cfg.controlSocket, cfg.controlDefault = defaultControlSocket(st.Sidecar), true
		st.ho.setControlSocket(cfg.controlSocket)
	}
	handedOver := make(chan struct{})
	var ctl *net.UnixListener
	var ctlMu sync.Mutex
	setCtl := func(l *net.UnixListener) {
		ctlMu.Lock()
		ctl = l
		ctlMu.Unlock()
	}
	if in := cfg.inherit; in != nil {
		pred := in.pred.Peer()
		fmt.Fprintf(stdout, "tracecar sidecar: took over process %d (started %s): its listeners and runtime state; its connections follow\n",
			pred.PID, pred.StartedAt.Format(time.RFC3339))
		st.ho.asked()
		if err := in.pred.Ready(); err != nil {
			log.Warn().Err(err).Msg("takeover: the predecessor went away before its connections: serving its listeners")
		}
		notifySupervisor(fmt.Sprintf("MAINPID=%d\nREADY=1", os.Getpid()))
		go func() {
			res, err := st.proxy.Adopt(ctx, in.pred)
			st.ho.adopted(res, err == nil)
			in.pred.Close()
			if err != nil {
				log.Warn().Err(err).Msg("takeover: serving what the predecessor handed over")
			}
			if ferr := st.restoreFinal(res.Final); ferr != nil {
				log.Warn().Err(ferr).Msg("takeover: the predecessor's statement statistics are lost")
			}
			fmt.Fprintf(stdout, "tracecar sidecar: took over %d connections from process %d (%d closed there instead) in %v\n",
				res.Moved, pred.PID, res.Closed, st.ho.connectionsTook().Round(time.Microsecond))
			setCtl(in.control)
			st.serveControl(ctx, in.control, handedOver)
		}()
	} else {
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
				st.stop()
				return err
			default:
				setCtl(l)
				go st.serveControl(ctx, l, handedOver)
			}
		}
		notifySupervisor("READY=1")
	}
	err = runStack(ctx, st, handedOver, hup, live, stdout)
	ctlMu.Lock()
	if ctl != nil {
		select {
		case <-handedOver:
			ctl.SetUnlinkOnClose(false) // the socket file is the successor's
		default:
			ctl.SetUnlinkOnClose(true)
		}
		ctl.Close()
	}
	ctlMu.Unlock()
	return err
}

// serveControl serves the control socket: each new process that connects takes this one
// over, one at a time. When one has, it closes handedOver and returns. A handover that fails
// leaves this process serving on, and the socket open to the next.
func (st *stack) serveControl(ctx context.Context, ln *net.UnixListener, handedOver chan<- struct{}) {
	log := st.reg.Logger(logs.Sidecar)
	for {
		succ, err := sidecar.AcceptSuccessor(ln)
		if err != nil {
			return // closed: the process is stopping
		}
		if err := st.handoff(ctx, succ, ln, log); err != nil {
			log.Warn().Err(err).Int("successor_pid", succ.Peer().PID).Msg("handover failed: this process serves on")
			continue
		}
		close(handedOver)
		return
	}
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
		if rerr := errors.Join(st.cqlLn.Resume(), st.adminLn.Resume()); rerr != nil {
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
	err = succ.Offer(offerCtx, []sidecar.ListenerFile{{Name: "cql", File: cf}, {Name: "admin", File: af}, {Name: "control", File: ctlFile}}, state)
	cancel()
	if err != nil {
		return resume(fmt.Errorf("offer the listeners: %w", err))
	}
	res, err := st.proxy.Handoff(ctx, succ, st.finalState)
	st.ho.count(res)
	if err != nil {
		return resume(err)
	}
	log.Info().Int("successor_pid", peer.PID).Int("moved", res.Moved).Int("closed", res.Closed).
		Msg("handed over: the successor serves the listeners and the connections; this process exits")
	return nil
}

// notifySupervisor sends state to systemd's notification socket when there is one
// (Type=notify): READY=1 once serving; with a takeover, MAINPID too, so that systemd
// follows the new process (NotifyAccess=all).
func notifySupervisor(state string) {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return
	}
	if strings.HasPrefix(path, "@") {
		path = "\x00" + path[1:]
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return
	}
	defer c.Close()
	c.Write([]byte(state))
}
