package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/audit"
	"github.com/tracecar/tracecar/internal/lifecycle"
	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/sidecar"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/cqlsink"
	"github.com/tracecar/tracecar/tracing/guardrail"
	"github.com/tracecar/tracecar/tracing/statements"
)

// stackConfig describes a sidecar, with its admin API, in front of a node.
type stackConfig struct {
	Listen, Admin, Node string // Node empty: start an embedded node
	NodeAPI             string
	AdvertiseAddr       string
	PeerPort            int
	DrainTimeout        time.Duration
	AdminToken          string
	AdminTLSCert        string
	AdminTLSKey         string
	AdminInsecure       bool
	OTLPEndpoint        string // "" with OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT set: the SDK reads the environment
	OTLPProtocol        string // "" means OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL, else http/protobuf
	BindValues          bool
	RingSize            int
	CQLSink             bool
	QueryLiterals       bool // keep literal values in recorded query text
	MaxQueryLen         int  // bound on recorded query text, bytes
	// TraceContextKeys are the custom payload keys of a request's W3C traceparent; nil
	// means "traceparent". FollowClientSampling starts with parent-based sampling on.
	TraceContextKeys     []string
	FollowClientSampling bool
	// TraceFloor starts the trace floor with this interval (--trace-floor); 0 is off.
	TraceFloor time.Duration
	// TLS is the client-facing CQL listener's TLS; nil means plaintext.
	TLS *tls.Config
	// NodeUsername and NodePassword log in to a node with PasswordAuthenticator, for what
	// the sidecar itself sends it (node events, the CQL sink). The password is never logged.
	NodeUsername, NodePassword string
	// NodeTLS is the TLS of everything that dials the node: the proxy's connections, the
	// CQL sink and the node-event fetch. Nil means plaintext.
	NodeTLS            *tls.Config
	MaxFrameSize       int         // bytes, header included; zero means the default
	MaxProtocolVersion int         // the highest version the proxy lets through; zero means 5
	MaxConnections     int         // zero means no limit
	NodeMemory         memoryLimit // the embedded node's --memory-limit
	MaxRequestInFlight int         // bytes of client frames held whole; zero means the default
	// ShardAwareListen is the sidecar's shard-aware port (--shard-aware-listen): IP:PORT,
	// "off", or "" for the --listen IP with the node's port number, once learnt.
	ShardAwareListen string

	// The runtime guardrail and the node's management API (see guardrail.go).
	Guardrail guardrail.Budget
	NodeKind  string // of NodeAPI; the embedded node's API is "tracecar"
	NodeApply admin.NodeApply
	// NoNodeTracing is --node-tracing off: sampled requests do not ask the node to trace.
	NoNodeTracing bool
	// ToggleMaxDuration is the timer a costly toggle sent without for= gets; 0: none.
	ToggleMaxDuration time.Duration

	// Peers maps peer nodes to their sidecars (--cluster-file, --peers); nil: the convention.
	Peers *sidecar.PeerMap

	Statements statementsConfig // per-statement statistics (see statements.go)

	Audit auditConfig // the audit log (see audit.go)

	// CaptureDir is where workload captures are written; "" refuses them (see capture.go).
	CaptureDir string
	// The handover (handover.go): what a predecessor handed over (nil: started
	// afresh), and the control socket, for the status.
	inherit       *inheritance
	controlSocket string
	// controlDefault says controlSocket is the default path, not one given with
	// --control-socket: a sidecar that cannot serve it (a FROM scratch image has no
	// temporary folder) runs on without one, and says so.
	controlDefault bool
	// schedPolicy is the scheduling policy the process's threads run under, as
	// --sched-policy names it, for the status; "" when none was set (applySchedPolicy).
	schedPolicy string
}

// stack is a sidecar, its admin API and, when embedded, its node: bound by newStack, and
// run by the lifecycle group it joins (join).
type stack struct {
	Sidecar, Admin, Node, NodeAPI string // addresses
	ShardAware                    string // the shard-aware port's, when given as IP:PORT
	tracer                        *tracing.Tracer
	guard                         *guardrail.Controller
	proxy                         *sidecar.Proxy
	closers                       []func(context.Context) error
	api, nodeAPI                  *admin.Server // nodeAPI: the embedded node's, else nil

	// front serves the proxy, the admin API and the guardrail; back the embedded node and
	// its API, which stop last, so that the proxy drains against a live node and the sinks
	// flush into it. unserved are the listeners that back serves, closed by discard when
	// the stack never runs.
	front, back []func(context.Context) error
	unserved    []net.Listener
	// stopping is set once the group began to stop the stack; serverStopped says a server
	// returned before that. running counts the stack's actors that have not returned.
	stopping, serverStopped atomic.Bool
	running                 sync.WaitGroup

	// For startStack's stacks, which run in a group of their own: stop ends it.
	quit func()
	done chan struct{}
	err  error

	// For a handover (handover.go): the listeners it
	// pauses and hands over, the runtime state it hands over, and what /tracecar/status and
	// /metrics say of it.
	cqlLn, adminLn *sidecar.Listener
	awareLn        *sidecar.Listener // the shard-aware one, when given as IP:PORT
	reg            *logs.Registry
	stmts          *statements.Stats
	audit          *audit.Log
	nodeSession    *cqlsink.Connector // the tracing sinks' node session, shared with the audit table
	embedded       bool               // the node runs in this process: no handover
	ho             *handoverState
}

// join adds the stack's actors to g. Each one's interrupt stops the whole stack in order:
// the front on ctx, then the closers (the tracer and its sinks, flushed), then the back on
// a context of its own, cancelled once the closers have run.
func (st *stack) join(ctx context.Context, g *lifecycle.Group) {
	frontCtx, frontCancel := context.WithCancel(ctx)
	backCtx, backCancel := context.WithCancel(context.WithoutCancel(ctx))
	interrupt := func(error) {
		st.stopping.Store(true)
		frontCancel()
	}
	var front sync.WaitGroup
	for _, serve := range st.front {
		front.Add(1)
		st.actor(g, func() error { defer front.Done(); return serve(frontCtx) }, interrupt)
	}
	st.running.Add(1)
	g.Add(func() error { // the closers, once the front has stopped
		defer st.running.Done()
		front.Wait()
		err := st.runClosers()
		backCancel()
		return err
	}, interrupt)
	for _, serve := range st.back {
		st.actor(g, func() error { return serve(backCtx) }, interrupt)
	}
}

// actor adds a server of the stack to g.
func (st *stack) actor(g *lifecycle.Group, serve func() error, interrupt func(error)) {
	st.running.Add(1)
	g.Add(func() error {
		defer st.running.Done()
		err := serve()
		if !st.stopping.Load() {
			st.serverStopped.Store(true)
		}
		return err
	}, interrupt)
}

// stop shuts a stack from startStack down in order: the proxy (which drains) and the admin
// API, then the tracer and its sinks (flushed), then the embedded node. It returns the
// first error met.
func (st *stack) stop() error {
	st.quit()
	<-st.done
	return st.err
}

// runClosers closes the tracer, its sinks and the capture, and returns the first error.
func (st *stack) runClosers() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	for _, c := range st.closers {
		if cerr := c(ctx); cerr != nil && err == nil {
			err = cerr
		}
	}
	return err
}

// discard releases a stack that will never run, and returns err.
func (st *stack) discard(err error) error {
	closeAll(st.unserved)
	st.runClosers()
	return err
}

// closeAll closes the listeners lns.
func closeAll(lns []net.Listener) {
	for _, ln := range lns {
		ln.Close()
	}
}

// What the stack holds of a handover to a new process: its methods, and the exchange, are
// handover.go's.

// inheritance is what a predecessor handed over: the listeners, the runtime state, and
// the connection to it, over which its client connections come next.
type inheritance struct {
	pred      *sidecar.Predecessor
	listeners map[string]net.Listener // cql, admin
	control   *net.UnixListener
	state     json.RawMessage // the runtime state (handoverParts)
	at        time.Time
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
