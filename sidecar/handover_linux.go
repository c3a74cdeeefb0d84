package sidecar

import (
	"context"
	"errors"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/sidecar/handover"
)

// The proxy's part in a handover (see handover.go and package handover): what package
// handover needs of the proxy (handover.Source in the old process, handover.Sink in the
// new one), on a type of its own. The loop's part, and the connection as package handover
// sees it, are in move_linux.go, below.

// servingGroup returns the group of the Serve call running, or nil.
func (p *Proxy) servingGroup() *group {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.serving
}

// allConns returns the proxy's connections.
func (p *Proxy) allConns() []*conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	cs := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		cs = append(cs, c)
	}
	return cs
}

// handoverProxy is the proxy as package handover sees it: handover.Source in the old
// process, handover.Sink in the new one.
type handoverProxy Proxy

func (hp *handoverProxy) p() *Proxy { return (*Proxy)(hp) }

// Handoff moves the proxy's connections to the successor s, which already serves the
// listeners (Successor.Offer): each plaintext connection on an event loop moves at a quiet
// point, waiting at most DrainTimeout for it; the others (TLS, the goroutine path, and
// those not quiet in time) drain and close here, and are counted and logged. It returns
// once every connection has moved or ended, and the successor has acknowledged the end of
// the handover.
//
// When every connection has moved or ended, final (when not nil) gives the bytes that go
// to the successor with the end, which Adopt returns there: what this process counted
// until then.
//
// When the successor goes away before that (or ctx is done), every connection it has not
// acknowledged is served here again, and Handoff returns the error: the caller serves on,
// with its listeners.
func (p *Proxy) Handoff(ctx context.Context, s *Successor, final func() []byte) (HandoffResult, error) {
	return handover.Handoff(ctx, (*handoverProxy)(p), s, final)
}

// Adopt takes over the connections that the predecessor hands over (Proxy.Handoff there),
// each served here from the moment it is acknowledged, as one of the connections of the
// Serve call running (which must be), and ending with it. It returns once the predecessor
// says the handover is done, or goes away (the connections adopted until then are served
// on; the others are the predecessor's, which kept them or died with them), or ctx is
// done.
func (p *Proxy) Adopt(ctx context.Context, pred *Predecessor) (HandoffResult, error) {
	return handover.Adopt(ctx, (*handoverProxy)(p), pred)
}

func (hp *handoverProxy) Conns() []handover.Conn {
	cs := hp.p().allConns()
	hs := make([]handover.Conn, len(cs))
	for i, c := range cs {
		hs[i] = (*movingConn)(c)
	}
	return hs
}

// Immovable says why a connection on the goroutine path cannot move.
func (hp *handoverProxy) Immovable() string {
	switch {
	case hp.env.cfg.TLS != nil:
		return "a TLS connection cannot move (Go's TLS state stays in its process)"
	case hp.env.nodeTLS != nil:
		return "a connection with TLS to the node cannot move (Go's TLS state stays in its process)"
	}
	return "a connection on the goroutine path (the event loop is off) cannot move"
}

func (hp *handoverProxy) DrainTimeout() time.Duration { return hp.env.cfg.DrainTimeout }

func (hp *handoverProxy) Connections() int { return hp.p().Stats().Connections }

func (hp *handoverProxy) Log() *zerolog.Logger { return hp.env.sh.Log }

func (hp *handoverProxy) Serving() bool { return hp.p().servingGroup() != nil }

func (hp *handoverProxy) StartLoops() {
	if !hp.env.noLoop {
		hp.loops.pick()
	}
}

// Import adopts one connection in the group of the Serve call running; serve, once it is
// acknowledged, moves it to a loop (or starts its goroutines). The descriptors are closed
// here on error (adoptConn closes them in every case), and never by the caller.
func (hp *handoverProxy) Import(m handover.State, clientFD, nodeFD int) (func(), error) {
	p := hp.p()
	p.mu.Lock()
	g := p.serving
	if g != nil {
		g.wg.Add(1)
	}
	p.mu.Unlock()
	if g == nil {
		syscall.Close(clientFD) // the descriptors are the proxy's, also on error (handover.Sink)
		syscall.Close(nodeFD)
		return nil, errors.New("the proxy is not serving")
	}
	c, err := p.adoptConn(m, clientFD, nodeFD, g)
	if err != nil {
		g.wg.Done()
		return nil, err
	}
	return func() {
		if p.env.noLoop || !c.toLoop(p.loops) {
			go c.serveAdopted() // else the loop retires it (closedOnLoop)
		}
	}, nil
}
