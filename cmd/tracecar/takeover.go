package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/tracecar/tracecar/internal/lifecycle"
	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/sidecar"
)

// The handover of a sidecar to a new process (README: Upgrade without dropping a
// connection): every sidecar serves a control socket; `tracecar sidecar --takeover`
// connects to it and receives, in order, the listeners (CQL, admin, and the control socket
// itself), the runtime state, and every plaintext connection (sidecar.Proxy.Handoff). The
// old process exits 0 once it has nothing left.

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

// joinTakeover adds to g the actor that takes over the predecessor's connections, once
// the stack serves its listeners, and then serves the control socket it handed over.
func (st *stack) joinTakeover(ctx context.Context, g *lifecycle.Group, in *inheritance, ctl *controlSocket, stdout io.Writer) {
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
		if !ctl.serve(in.control) {
			return nil
		}
		return st.controlActor(ctx, in.control, ctl, stdout)
	}, func(error) {
		cancel()
		ctl.interrupt(st)
	})
}
