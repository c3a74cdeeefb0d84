package cqlsink

import (
	"errors"
	"sync/atomic"

	"github.com/gocql/gocql"
)

// The states of a Connector's login, in Login.
const (
	LoginNotTried = "not_tried" // no connection attempted yet
	LoginOK       = "ok"        // the session is open: the node accepted the login, or asked for none
	LoginRefused  = "refused"   // the node refused the login, or asked for one without credentials
	LoginFailed   = "failed"    // the node could not be reached or the connection failed before a login
)

// Login is the state of a Connector's login to its node: the session that node events,
// the CQL sink, the audit table and the capture's schema reads share.
type Login struct {
	State string `json:"state"`
	// User is the Connector's Username; "" when it logs in as nobody.
	User string `json:"user"`
	// Error is why the last attempt failed; "" while State is ok or not_tried.
	Error string `json:"error,omitempty"`
	// Refused counts the attempts the node refused since start.
	Refused uint64 `json:"refused"`
}

// Err returns nil unless the node refused the login, and then an error naming the login
// and why, as /readyz reports it.
func (l Login) Err() error {
	if l.State != LoginRefused {
		return nil
	}
	who := "the sidecar's own login to the node"
	if l.User != "" {
		who += " as " + l.User
	}
	return errors.New(who + " is refused (node events, --cql-sink, the audit table): " + l.Error)
}

// errNoLogin is the refusal of a node that asks for a login when the Connector has no
// Username.
var errNoLogin = errors.New("the node requires a login: set --node-username and TRACECAR_NODE_PASSWORD")

// loginProbe wraps the Connector's authenticator to learn whether the node asked for a
// login (Challenge) and accepted it (Success): gocql reports a refusal only as the text
// of the connection's error.
type loginProbe struct {
	inner gocql.Authenticator // nil: no credentials
	asked *atomic.Bool
	ok    *atomic.Bool
	after bool // the first challenge has been answered
}

func (p *loginProbe) Challenge(req []byte) ([]byte, gocql.Authenticator, error) {
	p.asked.Store(true)
	if p.inner == nil {
		return nil, nil, errNoLogin
	}
	resp, next, err := p.inner.Challenge(req)
	if err != nil {
		return nil, nil, err
	}
	if p.after && next == nil {
		return resp, nil, nil
	}
	// Answer with a probe, so that gocql calls Success on it.
	return resp, &loginProbe{inner: next, asked: p.asked, ok: p.ok, after: true}, nil
}

func (p *loginProbe) Success(data []byte) error {
	p.ok.Store(true)
	if p.after && p.inner != nil {
		return p.inner.Success(data)
	}
	return nil
}
