//go:build linux

package handover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The control socket: a Unix socket of type SOCK_SEQPACKET, so that every message keeps
// its bounds and the descriptors sent with it (SCM_RIGHTS) arrive with its first packet.
// A message is one or more packets of [kind][more][payload ≤ maxPacket]; more is 1 on
// every packet but the last. Payloads are JSON, except the runtime state, which is the
// caller's bytes. The exchange, new process (successor) and old (predecessor):
//
//	successor                          predecessor
//	hello {proto, pid, started_at}  →
//	                                ←  hello {proto, pid, started_at, predecessor}  or  refuse {message}
//	                                ←  listeners {names} + their descriptors
//	                                ←  state (the caller's bytes)
//	ready                           →
//	                                ←  conn {id, state} + client and node sockets   (any number)
//	ack {id, ok}                    →                                               (one per conn)
//	                                ←  done {moved, closed}
//	end                             →
//
// Each side keeps what it holds when the other goes away (EOF): the predecessor serves on
// the listeners and every connection not acknowledged; the successor serves on the
// listeners it received and every connection it acknowledged.

// handoverProto is the version of the control socket's exchange; a peer speaking another
// is refused.
const handoverProto = 1

// maxPacket is the largest payload of one packet: well under the socket's send buffer, so
// that a packet is never refused for its size.
const maxPacket = 32 << 10

// maxFDs is the most descriptors one message carries (the listeners).
const maxFDs = 8

type msgKind byte

const (
	msgHello     msgKind = 'H'
	msgRefuse    msgKind = 'X'
	msgListeners msgKind = 'L'
	msgState     msgKind = 'S'
	msgReady     msgKind = 'R'
	msgConn      msgKind = 'C'
	msgAck       msgKind = 'A'
	msgDone      msgKind = 'D'
	msgEnd       msgKind = 'E'
)

// errPeerGone is a control connection closed by its other end.
var errPeerGone = errors.New("the other process closed the control socket")

type hello struct {
	Proto int `json:"proto"`
	Peer
}

// control is one end of a control connection. send is safe for concurrent use; recv is
// called by one goroutine at a time.
type control struct {
	uc   *net.UnixConn
	wmu  sync.Mutex
	rbuf []byte
	oob  []byte
}

func newControl(uc *net.UnixConn) *control {
	return &control{uc: uc, rbuf: make([]byte, maxPacket+2), oob: make([]byte, unix.CmsgSpace(4*maxFDs))}
}

// send writes one message, with fds on its first packet.
func (c *control) send(kind msgKind, body []byte, fds ...int) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	pkt := make([]byte, 0, 2+min(len(body), maxPacket))
	for first := true; first || len(body) > 0; first = false {
		n := min(len(body), maxPacket)
		more := byte(0)
		if n < len(body) {
			more = 1
		}
		pkt = append(append(pkt[:0], byte(kind), more), body[:n]...)
		if _, _, err := c.uc.WriteMsgUnix(pkt, oob, nil); err != nil {
			return fmt.Errorf("control socket: send: %w", err)
		}
		oob = nil
		body = body[n:]
	}
	return nil
}

func (c *control) sendJSON(kind msgKind, v any, fds ...int) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.send(kind, b, fds...)
}

// recv reads one message and the descriptors that came with it, which the caller owns.
func (c *control) recv() (msgKind, []byte, []int, error) {
	var body []byte
	var fds []int
	fail := func(err error) (msgKind, []byte, []int, error) {
		closeFDs(fds)
		return 0, nil, nil, err
	}
	for {
		n, oobn, flags, _, err := c.uc.ReadMsgUnix(c.rbuf, c.oob)
		if oobn > 0 {
			got, perr := parseRights(c.oob[:oobn])
			fds = append(fds, got...)
			if perr != nil {
				return fail(perr)
			}
		}
		switch {
		case err != nil && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)):
			return fail(errPeerGone)
		case err != nil:
			return fail(fmt.Errorf("control socket: receive: %w", err))
		case n == 0:
			return fail(errPeerGone) // a SOCK_SEQPACKET peer that closed reads as empty
		case n < 2 || flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0:
			return fail(errors.New("control socket: malformed packet"))
		}
		body = append(body, c.rbuf[2:n]...)
		if c.rbuf[1] == 0 {
			return msgKind(c.rbuf[0]), body, fds, nil
		}
	}
}

// expect reads one message of kind want into v (when v is not nil); a refuse message is
// returned as an error with its text.
func (c *control) expect(want msgKind, v any) ([]int, error) {
	kind, body, fds, err := c.recv()
	if err != nil {
		return nil, err
	}
	if kind == msgRefuse {
		closeFDs(fds)
		var r struct{ Message string }
		json.Unmarshal(body, &r)
		return nil, fmt.Errorf("refused by the other process: %s", r.Message)
	}
	if kind != want {
		closeFDs(fds)
		return nil, fmt.Errorf("control socket: got message %q, want %q", kind, want)
	}
	if v != nil {
		if b, ok := v.(*[]byte); ok {
			*b = body
		} else if err := json.Unmarshal(body, v); err != nil {
			closeFDs(fds)
			return nil, fmt.Errorf("control socket: message %q: %w", kind, err)
		}
	}
	return fds, nil
}

func (c *control) close() error { return c.uc.Close() }

func parseRights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for _, m := range msgs {
		got, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		fds = append(fds, got...)
	}
	return fds, nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// peerUID returns the user id of the process on the other end of uc.
func peerUID(uc *net.UnixConn) (uint32, error) {
	rc, err := uc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, cerr
	}
	return cred.Uid, nil
}

// checkPeer refuses a peer that runs as another user (root excepted): the socket's mode
// 0600 says the same, and this holds even if the file's mode was changed.
func checkPeer(uc *net.UnixConn) error {
	uid, err := peerUID(uc)
	if err != nil {
		return fmt.Errorf("control socket: peer credentials: %w", err)
	}
	if me := uint32(os.Getuid()); uid != me && uid != 0 {
		return fmt.Errorf("control socket: peer runs as uid %d, not %d", uid, me)
	}
	return nil
}

// ListenControl listens on the control socket at path, with mode 0600. A socket file left
// by a process that is gone (a crash) is replaced; one that a live process answers on is
// ErrControlInUse.
func ListenControl(path string) (*net.UnixListener, error) {
	addr := &net.UnixAddr{Name: path, Net: "unixpacket"}
	ln, err := net.ListenUnix("unixpacket", addr)
	if err != nil && errors.Is(err, syscall.EADDRINUSE) {
		if c, derr := net.DialTimeout("unixpacket", path, time.Second); derr == nil {
			c.Close()
			return nil, fmt.Errorf("control socket %s: %w", path, ErrControlInUse)
		}
		if rerr := os.Remove(path); rerr != nil {
			return nil, fmt.Errorf("control socket %s: remove the stale socket: %w", path, rerr)
		}
		ln, err = net.ListenUnix("unixpacket", addr)
	}
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	return ln, nil
}

// Successor is the new process on the other end of the control socket, as the old process
// sees it, from AcceptSuccessor until the handover is done. Its methods are called in the
// order of the exchange, from one goroutine.
type Successor struct {
	ctl  *control
	peer Peer
}

// AcceptSuccessor waits on ln for a new process that takes this one over, and returns it
// once it has said hello; a peer of another user or protocol is refused and waited past.
func AcceptSuccessor(ln *net.UnixListener) (*Successor, error) {
	for {
		uc, err := ln.AcceptUnix()
		if err != nil {
			return nil, err
		}
		s, err := greetSuccessor(uc)
		if err != nil {
			uc.Close()
			continue
		}
		return s, nil
	}
}

func greetSuccessor(uc *net.UnixConn) (*Successor, error) {
	ctl := newControl(uc)
	if err := checkPeer(uc); err != nil {
		ctl.sendJSON(msgRefuse, map[string]string{"message": err.Error()})
		return nil, err
	}
	uc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var h hello
	if _, err := ctl.expect(msgHello, &h); err != nil {
		return nil, err
	}
	uc.SetReadDeadline(time.Time{})
	if h.Proto != handoverProto {
		err := fmt.Errorf("handover protocol %d, this process speaks %d", h.Proto, handoverProto)
		ctl.sendJSON(msgRefuse, map[string]string{"message": err.Error()})
		return nil, err
	}
	if err := ctl.sendJSON(msgHello, hello{Proto: handoverProto, Peer: Self()}); err != nil {
		return nil, err
	}
	return &Successor{ctl: ctl, peer: h.Peer}, nil
}

// Peer returns the successor process.
func (s *Successor) Peer() Peer { return s.peer }

// Refuse tells the successor why it cannot take over, and closes the connection.
func (s *Successor) Refuse(msg string) {
	s.ctl.sendJSON(msgRefuse, map[string]string{"message": msg})
	s.ctl.close()
}

// Offer sends the listening sockets and the runtime state (the caller's encoding), then
// waits until the successor says it serves them. From then on the successor accepts on
// the listeners; this process keeps its own descriptors of them, and serves on them again
// if the handover fails.
func (s *Successor) Offer(ctx context.Context, lns []ListenerFile, state []byte) error {
	names := make([]string, len(lns))
	fds := make([]int, len(lns))
	for i, l := range lns {
		names[i], fds[i] = l.Name, int(l.File.Fd())
	}
	if err := s.ctl.sendJSON(msgListeners, names, fds...); err != nil {
		return err
	}
	if err := s.ctl.send(msgState, state); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { s.ctl.uc.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	_, err := s.ctl.expect(msgReady, nil)
	return err
}

// Close closes the control connection: the successor then keeps what it holds.
func (s *Successor) Close() error { return s.ctl.close() }

// Predecessor is the old process on the other end of the control socket, as the new
// process sees it, from DialPredecessor until the handover is done. Its methods are called
// in the order of the exchange, from one goroutine.
type Predecessor struct {
	ctl  *control
	peer Peer
}

// DialPredecessor connects to the old process's control socket at path and says hello.
func DialPredecessor(ctx context.Context, path string) (*Predecessor, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unixpacket", path)
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	uc := c.(*net.UnixConn)
	if err := checkPeer(uc); err != nil {
		uc.Close()
		return nil, err
	}
	ctl := newControl(uc)
	fail := func(err error) (*Predecessor, error) {
		ctl.close()
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	if err := ctl.sendJSON(msgHello, hello{Proto: handoverProto, Peer: Self()}); err != nil {
		return fail(err)
	}
	stop := context.AfterFunc(ctx, func() { uc.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	var h hello
	if _, err := ctl.expect(msgHello, &h); err != nil {
		return fail(err)
	}
	if h.Proto != handoverProto {
		return fail(fmt.Errorf("handover protocol %d, this process speaks %d", h.Proto, handoverProto))
	}
	return &Predecessor{ctl: ctl, peer: h.Peer}, nil
}

// Peer returns the predecessor process.
func (p *Predecessor) Peer() Peer { return p.peer }

// Receive returns the listening sockets, by name, and the runtime state that the
// predecessor offers. The caller owns the files.
func (p *Predecessor) Receive(ctx context.Context) (map[string]*os.File, []byte, error) {
	stop := context.AfterFunc(ctx, func() { p.ctl.uc.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	var names []string
	fds, err := p.ctl.expect(msgListeners, &names)
	if err != nil {
		return nil, nil, err
	}
	if len(fds) != len(names) {
		closeFDs(fds)
		return nil, nil, fmt.Errorf("control socket: %d listeners named, %d received", len(names), len(fds))
	}
	files := make(map[string]*os.File, len(names))
	for i, n := range names {
		files[n] = os.NewFile(uintptr(fds[i]), n)
	}
	var state []byte
	if _, err := p.ctl.expect(msgState, &state); err != nil {
		for _, f := range files {
			f.Close()
		}
		return nil, nil, err
	}
	return files, state, nil
}

// Ready tells the predecessor that this process serves the listeners: it then hands over
// its connections (see Adopt).
func (p *Predecessor) Ready() error { return p.ctl.send(msgReady, nil) }

// Close closes the control connection.
func (p *Predecessor) Close() error { return p.ctl.close() }
