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
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/audit"
	"github.com/tracecar/tracecar/internal/lifecycle"
	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/sidecar"
	"github.com/tracecar/tracecar/sidecar/handover"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/statements"
)

// The handover of a sidecar to a new process (README: Upgrade without dropping a
// connection): every sidecar serves a control socket; `tracecar sidecar --takeover`
// connects to it and receives, in order, the listeners (CQL, admin, and the control socket
// itself), the runtime state, and every plaintext connection (sidecar.Proxy.Handoff). The
// old process exits 0 once it has nothing left.

// The receiving side: the takeover.

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
	if err == nil && !json.Valid(raw) {
		err = errors.New("the runtime state is not JSON")
	}
	in.state = raw
	if err == nil && (in.listeners["cql"] == nil || in.listeners["admin"] == nil || in.control == nil) {
		err = errors.New("the predecessor did not hand over its cql, admin and control listeners")
	}
	if err != nil {
		in.close()
		return nil, fmt.Errorf("take over from process %d: %w", pred.Peer().PID, err)
	}
	return in, nil
}

// joinTakeover adds to g the actor that takes over the predecessor's connections, once
// the stack serves its listeners, and then serves the control socket it handed over.
func (st *stack) joinTakeover(ctx context.Context, g *lifecycle.Group, in *inheritance, ctl *handover.ControlSocket, stdout io.Writer) {
	log := st.reg.Logger(logs.Sidecar)
	pred := in.pred.Peer()
	fmt.Fprintf(stdout, "tracecar sidecar: took over process %d (started %s): its listeners and runtime state; its connections follow\n",
		pred.PID, pred.StartedAt.Format(time.RFC3339))
	st.ho.asked()
	if err := in.pred.Ready(); err != nil {
		log.Warn().Err(err).Msg("takeover: the predecessor went away before its connections: serving its listeners")
	}
	notifySupervisor(fmt.Sprintf("MAINPID=%d\nREADY=1", os.Getpid()))
	adoptCtx, cancel := context.WithCancel(ctx)
	g.Add(func() error {
		res, err := st.proxy.Adopt(adoptCtx, in.pred)
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
		if !ctl.Use(in.control) {
			return nil
		}
		return st.controlActor(ctx, in.control, ctl, stdout)
	}, func(error) {
		cancel()
		st.interruptControl(ctl)
	})
}

// The control socket, where a successor takes this process over: the giving side of the
// handover.

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
		cfg.controlSocket, cfg.controlDefault = handover.DefaultControlPath(cfg.Listen), true
	}
	if len(cfg.controlSocket) > 107 {
		return usageErrorf("--control-socket %q: a Unix socket path has at most 107 bytes", cfg.controlSocket)
	}
	return nil
}

// interruptControl stops the serving of the control socket once the stack has stopped:
// until then (while it drains) a successor may still take it over, as before the group.
func (st *stack) interruptControl(ctl *handover.ControlSocket) {
	go func() {
		st.running.Wait()
		ctl.Stop()
	}()
}

// joinControl listens on the control socket of a sidecar started afresh, and adds the
// actor that serves it to g. A socket that cannot be served is a warning, unless it was
// given with --control-socket: then its error stops the group.
func (st *stack) joinControl(ctx context.Context, g *lifecycle.Group, cfg stackConfig, ctl *handover.ControlSocket, stdout io.Writer) {
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
			ctl.Use(l)
			g.Add(func() error { return st.controlActor(ctx, l, ctl, stdout) }, func(error) { st.interruptControl(ctl) })
		}
	}
	notifySupervisor("READY=1")
}

// controlActor is the execute of the control socket's actor: it serves ln (each new
// process that connects takes this one over, one at a time; a handover that fails leaves
// this process serving on, and the socket open to the next), and returns nil once a
// successor took this process over, which stops the group, or once the group stopped it.
// A socket that fails to accept leaves the process serving on without one.
func (st *stack) controlActor(ctx context.Context, ln *net.UnixListener, ctl *handover.ControlSocket, stdout io.Writer) error {
	log := st.reg.Logger(logs.Sidecar)
	ctl.Serve(func(succ *sidecar.Successor) error { return st.handoff(ctx, succ, ln, log) },
		func(succ *sidecar.Successor, err error) {
			log.Warn().Err(err).Int("successor_pid", succ.Peer().PID).Msg("handover failed: this process serves on")
		})
	select {
	case <-ctl.HandedOver():
		if !st.stopping.Load() {
			fmt.Fprintln(stdout, "tracecar sidecar: handed over to the successor; exiting")
		}
	case <-ctl.Stopped():
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
	state, err := st.handoverParts().Export()
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

// The runtime state.

// handoverParts are the stack's parts whose state can change at runtime (through the admin
// API or the guardrail), and so moves to the successor rather than being read from its
// flags: each exports and restores its own (handover.Part), registered here in the order
// they are restored: the tracer before the guardrail, which reads its configuration.
func (st *stack) handoverParts() *handover.Parts {
	var ps handover.Parts
	ps.Register("tracing", st.tracer)
	ps.Register("guardrail", st.guard)
	ps.Register("loggers", st.reg)
	ps.Register("statements", st.stmts)
	ps.Register("timers", st.api)
	if st.audit != nil {
		ps.Register("audit", auditPart{st})
	}
	return &ps
}

// finalState is what the old process sends once its connections have moved: the
// statement statistics it gathered, and the prepared statements it learnt, to the end
// (finalRuntime).
func (st *stack) finalState() []byte {
	b, _ := json.Marshal(finalRuntime{Statements: st.stmts.List("calls", 0, true), Prepared: st.tracer.Statements().Entries()})
	return b
}

// finalRuntime is what counts until the end of a handover: the statement statistics (the
// successor has counted its own requests meanwhile, and adds these), and the prepared
// statements, with those prepared after the runtime state was sent: a driver that
// prepared one on the old process executes it on the new one, whose audit records and
// traces then show its text.
type finalRuntime struct {
	Statements []statements.Statement  `json:"statements,omitempty"`
	Prepared   []tracing.PreparedEntry `json:"prepared,omitempty"`
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
	reg := st.tracer.Statements()
	for _, e := range f.Prepared {
		if reg.Lookup(e.ID) == nil {
			reg.Put(e.ID, e.Statement)
		}
	}
	return nil
}

// restore installs the runtime state a predecessor handed over, before the stack serves:
// it wins over the flags, as the changes made through the admin API would have.
func (st *stack) restore(in *inheritance) error {
	if in == nil {
		return nil
	}
	return st.handoverParts().Restore(fromFlatState(in.state))
}

// fromFlatState returns the runtime state of a predecessor built before the state went as
// parts, in parts: it sent one flat object, whose trace_filter and prepared belong to the
// tracer's part and statement_stats and statement_prepared to the statistics'. A state
// already in parts (it has no statement_stats) is returned as it is, and so is one that
// does not parse, for Restore to refuse. Without this, an upgrade from such a process
// would start its filter, its prepared statements and its statistics' setting afresh.
func fromFlatState(b []byte) []byte {
	var flat map[string]json.RawMessage
	if json.Unmarshal(b, &flat) != nil {
		return b
	}
	enabled, ok := flat["statement_stats"]
	if !ok {
		return b
	}
	var tr map[string]json.RawMessage
	if json.Unmarshal(flat["tracing"], &tr) != nil || tr == nil {
		tr = map[string]json.RawMessage{}
	}
	for _, k := range []string{"trace_filter", "prepared"} {
		if v, ok := flat[k]; ok {
			tr[k] = v
			delete(flat, k)
		}
	}
	stats := map[string]json.RawMessage{"enabled": enabled}
	if v, ok := flat["statement_prepared"]; ok {
		stats["prepared"] = v
	}
	delete(flat, "statement_stats")
	delete(flat, "statement_prepared")
	var err error
	if flat["tracing"], err = json.Marshal(tr); err != nil {
		return b
	}
	if flat["statements"], err = json.Marshal(stats); err != nil {
		return b
	}
	out, err := json.Marshal(flat)
	if err != nil {
		return b
	}
	return out
}

// auditPart is the audit log's part of a handover: its settings (POST /tracecar/audit).
type auditPart struct{ st *stack }

func (a auditPart) ExportState() (json.RawMessage, error) {
	return json.Marshal(a.st.audit.Settings().View())
}

func (a auditPart) RestoreState(b json.RawMessage) error {
	var v audit.View
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	return a.st.restoreAudit(&v)
}

// restoreAudit installs the audit settings a predecessor handed over. A successor started
// without an audit sink cannot audit: it says so, loudly, and runs with the audit off.
func (st *stack) restoreAudit(v *audit.View) error {
	s, err := v.Settings()
	if err != nil {
		return err
	}
	if s.Enabled && !st.audit.HasSinks() {
		st.reg.Logger(logs.Admin).Error().Interface("inherited", v).
			Msg("takeover: the predecessor audited, but this process has no audit sink (--audit-dir): the audit log is OFF")
		s.Enabled = false
	}
	st.audit.Set(s)
	return nil
}

// Handovers as status and metrics say them.

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

// adminConfig makes the admin API report the process and its handover, refuse changes
// while the process hands itself over, and serve the connections' series.
func (h *handoverState) adminConfig(c *admin.Config) {
	accepted := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tracecar_client_connections_accepted_total",
		Help: "Client connections this process accepted (those taken over from a predecessor are in tracecar_handover_connections_total)."},
		func() float64 { return float64(h.st.proxy.Accepted()) })
	loopFailures := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tracecar_event_loop_failures_total",
		Help: "Waits of an event loop that failed (epoll_wait with an error other than EINTR): each closed that loop's connections, and the loop went on with a new epoll set."},
		func() float64 { return float64(sidecar.LoopFailures()) })
	c.Process, c.WriteGate = h.process, h.writeGate
	c.Collectors = append(c.Collectors, h.conns, accepted, loopFailures)
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

// resumeShardAware accepts again on the shard-aware port given as IP:PORT, after a
// handover that failed.
func (st *stack) resumeShardAware() error {
	if st.awareLn == nil {
		return nil
	}
	return st.awareLn.Resume()
}
