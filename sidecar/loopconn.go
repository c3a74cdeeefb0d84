//go:build linux

package sidecar

import (
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/tracecar/tracecar/internal/metrics"
	"github.com/tracecar/tracecar/sidecar/handover"
	"github.com/tracecar/tracecar/sidecar/internal/pipeline"
	"github.com/tracecar/tracecar/tracing"
	"golang.org/x/sys/unix"
)

// The event loop's types (see loop.go for the loop itself, the package doc for the
// layers): the loop, its commands, a connection as the loop carries it (loopConn) with its
// two sides, and the primitives that every part of the loop uses: posting a command, the
// socket table, the raw reads and writes, and the epoll events of a side. Everything here
// points down, at the connection's core; the loop's parts above (move_linux.go,
// loop_end.go, segments_loop.go, loopio.go, loop.go) point here.

// loop is one event loop.
type loop struct {
	epfd   int
	wakefd int // an eventfd: other goroutines post commands and write to it

	mu   sync.Mutex
	cmds []loopCmd

	// Loop goroutine only.
	sides   []*side     // by file descriptor: a socket's number is small and reused, a map lookup per event is not free
	closing []*loopConn // connections writing their last frames, by lastDeadline
	waiting []*side     // client sides waiting for the budget of frames held whole
	rbuf    []byte
	wbuf    []byte
	views   pipeline.Views // the frame views of every connection of the loop (pipeline.views)
	tickets []tracing.Ticket
	answers []metrics.Answer
	spare   pipeline.SpareSlots // the empty stream tables of its connections (streamTable.spare)
	events  []unix.EpollEvent
	// idle says that the last raw wait saw nothing for spin: the next wait parks (wait).
	idle bool
	spin time.Duration
	// waitFn is wait; a test puts a wait that fails in its place, before the loop runs.
	waitFn func() (int, error)
	// The gate through which the runtime's poller watches the loop's epoll set (park),
	// nil without one; armed says the set is in it, deadline that the gate has a read
	// deadline set.
	gate     *os.File
	gateFD   int
	gateConn syscall.RawConn
	armed    bool
	deadline bool
	peek     func(uintptr) bool // peekEvents
	peeked   int
	peekErr  unix.Errno
	// down is set while the loop starts over after a failed wait (fail): pick passes it by.
	down atomic.Bool
}

type loopCmdKind uint8

const (
	cmdAdd loopCmdKind = iota
	cmdDrain
	cmdClose
)

type loopCmd struct {
	kind loopCmdKind
	c    *loopConn
	h    *handoverCmd // a handover's command (move_linux.go)
}

// loopGroup is a set of event loops, started on first use. It is safe for concurrent use.
type loopGroup struct {
	once  sync.Once
	err   error // why the loops could not all start: no connection goes to them
	loops []*loop
	next  atomic.Uint32
}

// loopConn is a connection as the event loop carries it: the connection, and what only
// the loop keeps of it. The loop's sides and commands point at it.
type loopConn struct {
	*conn
	loopState
}

// loopState is what a connection in a loop holds: the loop, and its two sockets. Where the
// connection is on its way to closed is its lifecycle, as on the goroutine path.
type loopState struct {
	lp    *loop
	sides [2]side // the client, the node
	// lastDeadline bounds the writing of the last frames, once the connection is ending.
	lastDeadline time.Time
	move         loopMove // its part in a handover (move_linux.go)
}

// post hands a command to the loop. It is safe for concurrent use.
func (l *loop) post(cmd loopCmd) {
	l.mu.Lock()
	l.cmds = append(l.cmds, cmd)
	first := len(l.cmds) == 1
	l.mu.Unlock()
	if first {
		var one = [8]byte{1}
		unix.Write(l.wakefd, one[:])
	}
}

// onLoop returns the connection as its loop carries it, or nil when it is not on a loop;
// c.mu must be held.
func (c *conn) onLoop() *loopConn {
	lc, _ := c.carrier.(*loopConn)
	return lc
}

// inLoop reports whether the connection was moved to a loop; c.mu must be held.
func (c *conn) inLoop() bool { return c.onLoop() != nil }

// post asks the connection's loop to drain or close it (carrier): the loop does both.
func (c *loopConn) post(draining bool) bool {
	kind := cmdClose
	if draining {
		kind = cmdDrain
	}
	c.lp.post(loopCmd{kind: kind, c: c})
	return true
}

// wake: nothing of a connection on a loop sleeps (carrier).
func (c *loopConn) wake(bool) {}

// release: the loop let go of the connection when it closed it (carrier).
func (c *loopConn) release() {}

// side returns the side whose socket is fd, or nil.
func (l *loop) side(fd int32) *side {
	if uint32(fd) < uint32(len(l.sides)) {
		return l.sides[fd]
	}
	return nil
}

// setSide records s as the side of socket fd (nil: none).
func (l *loop) setSide(fd int, s *side) {
	if fd >= len(l.sides) {
		if s == nil {
			return
		}
		l.sides = append(l.sides, make([]*side, fd+1-len(l.sides))...)
		l.sides = l.sides[:cap(l.sides)]
	}
	l.sides[fd] = s
}

// discard reads what a socket about to be closed holds, up to a bound: closing a socket
// with unread input sends a reset instead of a FIN, and a reset makes the peer drop what it
// has not read yet (the last requests to the node, the last frames to the client).
func discard(fd int, buf []byte) {
	for range 16 {
		if n, err := sysRead(fd, buf); err != nil || n <= 0 {
			return
		}
	}
}

// loopReadSize is the shared read buffer of a loop: one read takes up to this much of what
// a socket holds.
const loopReadSize = 64 << 10

// side is one socket of a connection in a loop.
type side struct {
	c      *loopConn
	fd     int
	client bool
	peer   *side

	pend    []byte           // the start of a frame read from this socket, waiting for its rest
	need    int              // the size of the frame at the head of pend, once its header is in
	out     []byte           // bytes for this socket that it did not take yet
	tickets []tracing.Ticket // traced requests or responses in out, for conn.wrote
	events  uint32           // the epoll events registered
	paused  bool             // reading stopped: the peer has output pending, or draining
	// held is what the frame gathered in pend holds of the proxy-wide budget of client
	// frames held whole (Config.MaxRequestDataInFlight), 0 when none; budgetWait says that
	// reading is stopped until that budget has room for it.
	held       int
	budgetWait bool
	// awaitLarge says that the budget waited for is a v5 frame's that the next segment in
	// pend starts (awaitBudget): once it is held, pend is read again as it is.
	awaitLarge bool
}

// sysRead and sysWrite are recv(2) and send(2) on a non-blocking socket: they never block,
// so they skip the runtime's syscall bookkeeping (entersyscall, and exitsyscall's wake-up
// of another thread), which costs more than the call itself at a frame a time. They are
// recvfrom and sendto without an address rather than read and write, which take the file
// layer's way into the socket (fdget_pos, vfs_read and vfs_write, about 1.4% of the
// sidecar's CPU in mode off under perf); sendto's MSG_NOSIGNAL turns a write to a peer
// gone into EPIPE without a SIGPIPE.
func sysRead(fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), 0, 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

func sysWrite(fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), unix.MSG_NOSIGNAL, 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

// setEvents updates the epoll events of s: EPOLLIN unless paused, EPOLLOUT while output
// is pending.
func (l *loop) setEvents(s *side) {
	var e uint32
	if !s.paused {
		e |= unix.EPOLLIN
	}
	if len(s.out) > 0 {
		e |= unix.EPOLLOUT
	}
	if e == s.events {
		return
	}
	s.events = e
	ev := unix.EpollEvent{Events: e, Fd: int32(s.fd)}
	unix.EpollCtl(l.epfd, unix.EPOLL_CTL_MOD, s.fd, &ev)
}

// batch is what the frames of one read become: the bytes for the peer, and what is left to
// do once they are sent.
type batch struct {
	out     []byte                  // for the peer: d.out, or the loop's scratch buffer
	direct  bool                    // out is the scratch buffer: d had no output pending
	tickets []tracing.Ticket        // the traced frames in out, for conn.wrote
	answers []metrics.Answer        // the requests answered by the responses in out, for metrics
	arrived int64                   // when the read returned, once a frame needed it (arrival)
	drained bool                    // a response was the answer a drained connection waited for
	need    int                     // the size of a frame whose header is in and whose rest is not
	await   int                     // the size of a v5 frame that waits for the budget (holdLarge)
	bad     *pipeline.ProtocolError // a malformed client frame ends the connection
	nodeErr error                   // so does a malformed node frame
}

// handoverCmd is the argument of a handover's loop command.
type handoverCmd struct {
	replies *handover.Replies // cmdMove: where the outcome goes
	d       handover.Detached // cmdAttach: the sockets and bytes to serve again
}

// loopMove is a connection's part in a move, on its loop; loop goroutine only.
type loopMove struct {
	moving  bool
	replies *handover.Replies
}
