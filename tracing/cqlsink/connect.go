package cqlsink

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocql/gocql"
	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/tracing"
)

// retryEvery bounds how often a Connector retries a failed connection.
const retryEvery = 5 * time.Second

// Connector opens one gocql session to a single node on first use, and shares it. A
// sidecar starts before its node may be reachable, so nothing connects at start, and a
// failed attempt is retried at most every few seconds. It is safe for concurrent use.
type Connector struct {
	// Addr is the node's host:port. The session talks to that node only: peers are
	// neither looked up nor used, since the traces to read are that node's own.
	Addr string
	// Username and Password, when Username is set, log in with PasswordAuthenticator.
	Username, Password string
	// TLS, when set, encrypts the connection; the host name is verified unless
	// TLS.InsecureSkipVerify is set.
	TLS *tls.Config
	// Configure, when set, adjusts the cluster config (compression, timeouts) before
	// connecting, after the fields above are applied.
	Configure func(*gocql.ClusterConfig)
	// Logger, when set, gets a warning when the node refuses the login, once until a
	// login succeeds again; later refusals are counted (Login.Refused) and logged at
	// debug level.
	Logger *zerolog.Logger
	// IdleClose, when above 0, closes the session once Session has not been called for
	// that long; the next call connects again. Each of gocql's connections sends the node a
	// heartbeat every 5 s for as long as it is open, whatever the traffic: a sidecar that
	// once fetched node events, or wrote a row, would wake (and wake its node) for ever.
	IdleClose time.Duration

	mu      sync.Mutex
	s       *gocql.Session
	err     error
	tried   time.Time
	timeout time.Duration
	refused uint64
	warned  bool                  // a refusal was warned of since the last login that succeeded
	noWait  bool                  // tests: retry at once
	login   atomic.Pointer[Login] // nil before the first attempt
	used    time.Time             // the last call to Session that returned s
	idle    *time.Timer           // closeIdle, armed while s is open and IdleClose > 0
	closes  atomic.Uint64         // sessions closed for idleness (closeIdle)
}

// Session returns the shared session, connecting first if needed.
func (c *Connector) Session(ctx context.Context) (*gocql.Session, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.s != nil {
		c.used = time.Now()
		return c.s, nil
	}
	if c.err != nil && time.Since(c.tried) < retryEvery && !c.noWait {
		return nil, c.err
	}
	c.tried = time.Now()
	host, portStr, err := net.SplitHostPort(c.Addr)
	if err != nil {
		c.err = fmt.Errorf("node address %q: %w", c.Addr, err)
		return nil, c.err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		c.err = fmt.Errorf("node address %q: bad port", c.Addr)
		return nil, c.err
	}
	cc := gocql.NewCluster(host)
	cc.Port = port
	cc.NumConns = 1
	cc.Timeout = 5 * time.Second
	cc.ConnectTimeout = 5 * time.Second
	cc.DisableInitialHostLookup = true
	cc.Events.DisableNodeStatusEvents = true
	cc.Events.DisableTopologyEvents = true
	cc.HostFilter = gocql.WhiteListHostFilter(host)
	cc.Consistency = gocql.One
	// Each query goes out at once: they are few (a node-event fetch is two queries per
	// tick, whatever the sessions), and gocql's coalescing costs a timer and a goroutine
	// wake-up per write.
	cc.WriteCoalesceWaitTime = 0
	cc.Logger = log.New(io.Discard, "", 0) // failures come back as errors, logged by the tracer
	probe := &loginProbe{asked: new(atomic.Bool), ok: new(atomic.Bool)}
	if c.Username != "" {
		probe.inner = gocql.PasswordAuthenticator{Username: c.Username, Password: c.Password}
	}
	cc.Authenticator = probe
	if c.TLS != nil {
		cc.SslOpts = &gocql.SslOptions{Config: c.TLS.Clone(), EnableHostVerification: !c.TLS.InsecureSkipVerify}
	}
	if c.Configure != nil {
		c.Configure(cc)
	}
	s, err := cc.CreateSession()
	if err != nil {
		c.err = fmt.Errorf("connect to node %s: %w", c.Addr, err)
		c.failed(probe.asked.Load() && !probe.ok.Load())
		return nil, c.err
	}
	c.s, c.err, c.warned = s, nil, false
	c.login.Store(&Login{State: LoginOK, User: c.Username, Refused: c.refused})
	c.used = time.Now()
	if c.IdleClose > 0 {
		c.idle = time.AfterFunc(c.IdleClose, c.closeIdle)
	}
	return s, nil
}

// closeIdle closes the session if Session has not been called for IdleClose, and otherwise
// looks again when that will be so: one wake-up per IdleClose while the session is in use.
func (c *Connector) closeIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.s == nil {
		return
	}
	if left := c.IdleClose - time.Since(c.used); left > 0 {
		c.idle.Reset(left)
		return
	}
	c.s.Close()
	c.s, c.idle = nil, nil
	c.closes.Add(1)
}

// failed records a failed attempt, refused by the node's authenticator or not, and warns
// of the first refusal in a row.
func (c *Connector) failed(refused bool) {
	l := Login{State: LoginFailed, User: c.Username, Error: c.err.Error(), Refused: c.refused}
	if !refused {
		c.login.Store(&l)
		return
	}
	c.refused++
	first := !c.warned
	c.warned = true
	l.State, l.Refused = LoginRefused, c.refused
	c.login.Store(&l)
	if c.Logger == nil {
		return
	}
	ev := c.Logger.Debug()
	if first {
		ev = c.Logger.Warn()
	}
	ev.Str("node", c.Addr).Str("user", c.Username).Uint64("refused", c.refused).Err(c.err).
		Msg("the node refused the sidecar's own login: no node events, --cql-sink or audit table rows until it succeeds (retried every 5s; /readyz answers 503, tracecar_node_login_refused_total counts)")
}

// Login returns the state of c's login to its node. It does not wait for an attempt in
// progress, and is safe for concurrent use.
func (c *Connector) Login() Login {
	if l := c.login.Load(); l != nil {
		return *l
	}
	return Login{State: LoginNotTried, User: c.Username}
}

// Ready reports why the sidecar's own login to the node fails, for /readyz: with a
// Username it connects first if need be (at most one attempt every few seconds), so that
// a wrong password shows before anything needs the session; without one it reports a
// refusal already seen. It returns ctx's error if ctx ends before the attempt does.
func (c *Connector) Ready(ctx context.Context) error {
	if c.Username == "" {
		return c.Login().Err()
	}
	done := make(chan struct{})
	go func() {
		_, _ = c.Session(ctx) // Login says how it went
		close(done)
	}()
	select {
	case <-done:
		return c.Login().Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close closes the session, if one was opened.
func (c *Connector) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.s != nil {
		c.s.Close()
		c.s = nil
	}
	if c.idle != nil {
		c.idle.Stop()
		c.idle = nil
	}
}

// LazyNodeEvents is a tracing.NodeEventSource that connects through c on first use.
func LazyNodeEvents(c *Connector) tracing.NodeEventSource { return lazyEvents{c} }

type lazyEvents struct{ c *Connector }

func (l lazyEvents) Finished(ctx context.Context, ids [][16]byte) ([]bool, error) {
	s, err := l.c.Session(ctx)
	if err != nil {
		return nil, err
	}
	return NewNodeEvents(s).Finished(ctx, ids)
}

func (l lazyEvents) Events(ctx context.Context, ids [][16]byte) ([][]tracing.Event, error) {
	s, err := l.c.Session(ctx)
	if err != nil {
		return nil, err
	}
	return NewNodeEvents(s).Events(ctx, ids)
}

// LazyTableSink is a TableSink that connects through c on its first write.
func LazyTableSink(c *Connector, ttl func() int64) tracing.Sink {
	return &lazyTable{c: c, ttl: ttl}
}

type lazyTable struct {
	c    *Connector
	ttl  func() int64
	mu   sync.Mutex
	sink *TableSink
}

func (l *lazyTable) Name() string { return "cql" }

// Write writes s through the connector's session, which may have been closed for idleness
// and opened again since the last Write: a new session gets a new TableSink, which checks
// the tables again (CREATE … IF NOT EXISTS) before its first row.
func (l *lazyTable) Write(ctx context.Context, s *tracing.Session) error {
	sess, err := l.c.Session(ctx)
	if err != nil {
		return err
	}
	l.mu.Lock()
	sink := l.sink
	if sink == nil || sink.s != sess {
		sink = NewTableSink(sess, l.ttl)
		l.sink = sink
	}
	l.mu.Unlock()
	return sink.Write(ctx, s)
}

func (l *lazyTable) Close(ctx context.Context) error { return nil }
