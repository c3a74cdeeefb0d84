package main

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/sidecar"
)

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
	loopFailures := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tracecar_event_loop_failures_total",
		Help: "Waits of an event loop that failed (epoll_wait with an error other than EINTR): each closed that loop's connections, and the loop went on with a new epoll set."},
		func() float64 { return float64(sidecar.LoopFailures()) })
	return []admin.Option{admin.WithProcess(h.process), admin.WithWriteGate(h.writeGate),
		admin.WithCollector(h.conns), admin.WithCollector(accepted), admin.WithCollector(loopFailures)}
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
