//go:build linux

package handover

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

var nop = zerolog.Nop()

// emptyProxy is a proxy without connections, on either side of a handover.
type emptyProxy struct{ t *testing.T }

func (emptyProxy) Conns() []Conn               { return nil }
func (emptyProxy) Immovable() string           { return "" }
func (emptyProxy) DrainTimeout() time.Duration { return time.Second }
func (emptyProxy) Connections() int            { return 0 }
func (emptyProxy) Log() *zerolog.Logger        { return &nop }
func (emptyProxy) Serving() bool               { return true }
func (emptyProxy) StartLoops()                 {}
func (p emptyProxy) Import(State, int, int) (func(), error) {
	p.t.Error("Import called; the predecessor has no connections")
	return func() {}, nil
}

// TestHandoverWithoutConnections: the whole exchange on the control socket, between two
// proxies that declare no connection: the state and the final bytes arrive, and both sides
// count nothing.
func TestHandoverWithoutConnections(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	path := filepath.Join(t.TempDir(), "ctl.sock")
	ln, err := ListenControl(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type outcome struct {
		res Result
		err error
	}
	old := make(chan outcome, 1)
	go func() {
		s, err := AcceptSuccessor(ln)
		if err != nil {
			old <- outcome{err: err}
			return
		}
		defer s.Close()
		if err := s.Offer(ctx, nil, []byte("state")); err != nil {
			old <- outcome{err: err}
			return
		}
		res, err := Handoff(ctx, emptyProxy{t}, s, func() []byte { return []byte("final") })
		old <- outcome{res, err}
	}()
	pred, err := DialPredecessor(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer pred.Close()
	files, state, err := pred.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 0 || string(state) != "state" {
		t.Errorf("got %d listeners and state %q; want none and %q", len(files), state, "state")
	}
	if err := pred.Ready(); err != nil {
		t.Fatal(err)
	}
	res, err := Adopt(ctx, emptyProxy{t}, pred)
	if err != nil {
		t.Fatal(err)
	}
	if res.Moved != 0 || res.Closed != 0 || string(res.Final) != "final" {
		t.Errorf("Adopt: got %+v; want nothing moved or closed, and final %q", res, "final")
	}
	o := <-old
	if o.err != nil || o.res.Moved != 0 || o.res.Closed != 0 {
		t.Errorf("Handoff: got %+v, %v; want nothing moved or closed", o.res, o.err)
	}
}
