//go:build linux

package handover

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
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

// refusingProxy is a proxy whose Import fails after it closed the descriptors it was
// given, as Sink says it does, and whose process opens other files at once, which take the
// freed numbers (dup3 onto a number closes the file there and reuses the number in one
// step, where another goroutine could not take it in between).
type refusingProxy struct {
	emptyProxy
	reused []int // the files now at the numbers Import was given
}

func (p *refusingProxy) Import(_ State, clientFD, nodeFD int) (func(), error) {
	for _, fd := range []int{clientFD, nodeFD} {
		var pipe [2]int
		if err := unix.Pipe2(pipe[:], unix.O_CLOEXEC); err != nil {
			p.t.Fatal(err)
		}
		if err := unix.Dup3(pipe[0], fd, unix.O_CLOEXEC); err != nil {
			p.t.Fatal(err)
		}
		unix.Close(pipe[0])
		unix.Close(pipe[1])
		p.reused = append(p.reused, fd)
	}
	return nil, errors.New("refused on purpose")
}

// TestAdoptRefusedClosesOnce: when the new process's Import refuses a connection (having
// closed its descriptors, whose numbers other files of the process may then take at
// once), adoptOne refuses it to the predecessor and closes nothing more: the files now at
// those numbers stay open.
func TestAdoptRefusedClosesOnce(t *testing.T) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	uc := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "control")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c.(*net.UnixConn)
	}
	ours, theirs := newControl(uc(pair[0])), newControl(uc(pair[1]))
	defer ours.close()
	defer theirs.close()
	var sockets [2]int
	if err := unix.Pipe2(sockets[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(State{ID: 7})
	sink := &refusingProxy{emptyProxy: emptyProxy{t}}
	if n := adoptOne(sink, &Predecessor{ctl: ours}, body, sockets[:]); n != 0 {
		t.Fatalf("adoptOne returned %d for a refused connection; want 0", n)
	}
	var ack ackMsg
	if _, err := theirs.expect(msgAck, &ack); err != nil {
		t.Fatal(err)
	}
	if ack.ID != 7 || ack.OK || ack.Reason == "" {
		t.Errorf("ack %+v; want connection 7 refused with a reason", ack)
	}
	for _, fd := range sink.reused {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
			t.Errorf("descriptor %d, taken by another file after Import closed it, was closed again: %v", fd, err)
		}
		unix.Close(fd)
	}
}
