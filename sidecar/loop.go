//go:build linux

package sidecar

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/tracecar/tracecar/sidecar/handover"
)

// The event loop carries plaintext TCP connections once they are open (see the package
// doc). A loop is one goroutine around a level-triggered epoll set;
// it owns the sockets of its connections (duplicated file descriptors, taken from the
// runtime's poller) and everything per connection that the two goroutines of the goroutine
// path own. It never blocks but in epoll_wait.

// processLoops are the loops of the process, which every Proxy uses (Proxy.loops). They
// are not the Proxy's own: a loop holds a P for good (see wait) and runs for the life of the
// process, and the GOMAXPROCS it raises is the process's, so loops per Proxy would add Ps
// for every Proxy that a process (a test binary, say) creates, and leave them behind.
var processLoops loopGroup

// pick returns a loop for a new connection, starting the loops if need be (start): one per two
// of GOMAXPROCS (at least one), as the node and the clients need CPU too and one loop
// serving more sockets per wake-up does more per system call; TRACECAR_EVENT_LOOPS=n
// overrides that.
func (g *loopGroup) pick() (*loop, error) {
	if err := g.start(); err != nil {
		return nil, err
	}
	for range len(g.loops) {
		if l := g.loops[int(g.next.Add(1))%len(g.loops)]; !l.down.Load() {
			return l, nil
		}
	}
	return nil, errors.New("every event loop is starting over after a failure")
}

// start starts the loops, once; later calls return what the first did. Serve calls it
// before it accepts, so that the loops' fixed cost (their buffers, the Ps they add, which
// take their own caches of heap spans) is paid when the sidecar starts, and neither by the
// first client's connection nor counted in what connections cost.
func (g *loopGroup) start() error {
	g.once.Do(func() {
		n := max(1, runtime.GOMAXPROCS(0)/2)
		if v, err := strconv.Atoi(os.Getenv("TRACECAR_EVENT_LOOPS")); err == nil && v > 0 {
			n = v
		}
		// Each loop holds a P for good (see wait): the rest of the process keeps as many
		// as it had.
		runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + n)
		for range n {
			l, err := newLoop()
			if err != nil {
				g.err = err
				return
			}
			g.loops = append(g.loops, l)
			go l.run()
		}
	})
	return g.err
}

func newLoop() (*loop, error) {
	wfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	l := &loop{
		wakefd: wfd,
		rbuf:   make([]byte, loopReadSize),
		events: make([]unix.EpollEvent, 128),
		spin:   loopSpin(),
	}
	if err := l.openEpoll(); err != nil {
		unix.Close(wfd)
		return nil, err
	}
	l.waitFn, l.peek = l.wait, l.peekEvents
	return l, nil
}

// dupFD returns a duplicate of nc's socket, non-blocking and close-on-exec. It fails for
// connections that are not plain TCP.
func dupFD(nc net.Conn) (int, error) {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return -1, errors.New("not a TCP connection")
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var derr error
	if err := rc.Control(func(f uintptr) {
		fd, derr = unix.FcntlInt(f, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return -1, err
	}
	if derr != nil {
		return -1, derr
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// toLoop moves an open connection to an event loop, with whatever its client reader
// already holds. It reports false, and changes nothing, when the connection cannot go (not
// plain TCP: TLS connections stay on the goroutine path).
func (c *conn) toLoop(g *loopGroup) bool {
	if _, ok := c.client.(*net.TCPConn); !ok {
		return false
	}
	if _, ok := c.node.(*net.TCPConn); !ok {
		return false
	}
	l, err := g.pick()
	if err != nil {
		c.pipe.Warn().Err(err).Msg("event loop unavailable: using goroutines")
		return false
	}
	// Hold mu while the sockets change hands, so that closeAll and drain either ran before
	// or post to the loop after.
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.getState() >= stateEnding {
		return false
	}
	// What the version gate queued for the client (the answer to a refused version
	// followed at once by a frame of a supported one) goes out before the writer is left.
	if c.toClient.flush() != nil {
		return false
	}
	cfd, err := dupFD(c.client)
	if err != nil {
		return false
	}
	nfd, err := dupFD(c.node)
	if err != nil {
		unix.Close(cfd)
		return false
	}
	// Closing the originals takes the sockets out of the runtime's poller, which would
	// otherwise be woken for every packet as well; the duplicates keep them open.
	c.client.Close()
	c.node.Close()
	// The closed originals are dropped: with their addresses they are half a kilobyte that
	// an idle connection would keep. What reads them later (closeAll, drain) asks inLoop
	// first, under mu.
	c.client, c.node = nil, nil
	lc := &loopConn{conn: c}
	cs, ns := &lc.sides[0], &lc.sides[1]
	*cs = side{c: lc, fd: cfd, client: true, peer: ns}
	*ns = side{c: lc, fd: nfd, peer: cs, pend: c.takeNodePend()}
	if n := c.cr.Buffered(); n > 0 {
		b, _ := c.cr.Peek(n)
		cs.pend = append([]byte(nil), b...)
	}
	c.cr.Discard(c.cr.Buffered()) // its buffer goes back to the pool
	c.cr, c.toClient = nil, nil   // the loop's buffers serve from here on
	lc.lp = l
	c.carrier = lc
	l.post(loopCmd{kind: cmdAdd, c: lc})
	return true
}

// run is the loop goroutine. It is not locked to its OS thread: while it is busy the
// runtime preempts it about 50 times a second (its raw wait looks like a goroutine that runs
// long, see wait), and a locked goroutine preempted hands its P to another thread and is
// handed it back (futex wake-ups and two context switches each time), where an unlocked
// one is simply run again by the thread that was running it.
func (l *loop) run() {
	for {
		n, err := l.waitFn()
		switch {
		case err == unix.EINTR:
			// The runtime's preemption signal can interrupt every wait before its timeout
			// (it is sent to a goroutine that runs long, and a raw wait looks like one), so
			// the deadlines below are checked after an interrupted wait too.
			n = 0
		case err != nil:
			l.fail(err)
			continue
		}
		if len(l.closing) > 0 {
			l.expire()
		}
		if len(l.waiting) > 0 {
			l.retryBudget()
		}
		for i := range n {
			ev := &l.events[i]
			if ev.Fd == int32(l.wakefd) {
				l.commands()
				continue
			}
			s := l.side(ev.Fd)
			if s == nil {
				continue // closed earlier in this batch
			}
			if ev.Events&unix.EPOLLOUT != 0 {
				l.writeOut(s)
				if l.side(ev.Fd) != s {
					continue
				}
			}
			switch {
			case ev.Events&(unix.EPOLLIN|unix.EPOLLHUP|unix.EPOLLERR) == 0:
			case !s.paused:
				l.read(s)
			case ev.Events&(unix.EPOLLHUP|unix.EPOLLERR) != 0:
				// Reported even while reading is paused: the socket is dead.
				l.readEnded(s, errors.New("connection reset"))
			}
			if s.c.move.moving {
				l.tryMove(s.c)
			}
		}
	}
}

// commands runs the commands posted to the loop.
func (l *loop) commands() {
	var b [8]byte
	unix.Read(l.wakefd, b[:])
	l.mu.Lock()
	cmds := l.cmds
	l.cmds = nil
	l.mu.Unlock()
	for _, cmd := range cmds {
		c := cmd.c
		switch cmd.kind {
		case cmdAdd:
			l.add(c)
		case cmdDrain:
			l.drain(c)
		case cmdClose:
			l.close(c)
		default:
			l.handover(cmd)
		}
	}
}

// add registers a connection's sockets, and forwards the frames its client reader held.
func (l *loop) add(c *loopConn) {
	c.pipe.Views = &l.views
	c.pipe.Streams.SetSpares(&l.spare)
	cs, ns := &c.sides[0], &c.sides[1]
	for _, s := range []*side{cs, ns} {
		s.events = unix.EPOLLIN
		ev := unix.EpollEvent{Events: s.events, Fd: int32(s.fd)}
		if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, s.fd, &ev); err != nil {
			c.pipe.Warn().Err(err).Msg("event loop: epoll_ctl")
			l.close(c)
			return
		}
		l.setSide(s.fd, s)
	}
	if c.draining() {
		l.drain(c)
	}
	// What an old process read from the node and did not forward (handover.go).
	if len(ns.pend) > 0 && c.getState() != stateClosed {
		data := ns.pend
		ns.pend = nil
		l.frames(ns, data)
	}
	if len(cs.pend) > 0 && c.getState() != stateClosed {
		data := cs.pend
		cs.pend = nil
		l.frames(cs, data)
	}
}

// handover runs a handover's loop command.
func (l *loop) handover(cmd loopCmd) {
	c := cmd.c
	switch cmd.kind {
	case cmdMove:
		if c.getState() != stateOpen || c.move.moving || c.sides[0].fd < 0 {
			cmd.h.replies.Put(handover.Reply{Conn: (*movingConn)(c.conn), Outcome: handover.Refused})
			return
		}
		c.move = loopMove{moving: true, replies: cmd.h.replies}
		cs := &c.sides[0]
		cs.paused = true
		l.setEvents(cs)
		l.tryMove(c)
	case cmdMoveCancel:
		if !c.move.moving {
			return // its outcome is on its way already
		}
		q := c.move.replies
		c.move = loopMove{}
		cs, ns := &c.sides[0], &c.sides[1]
		if c.getState() == stateOpen && !cs.budgetWait && len(ns.out) == 0 {
			cs.paused = false
			l.setEvents(cs)
		}
		q.Put(handover.Reply{Conn: (*movingConn)(c.conn), Outcome: handover.Canceled})
	case cmdAttach:
		d := cmd.h.d
		if c.getState() == stateClosed {
			unix.Close(d.FDs[0])
			unix.Close(d.FDs[1])
			return
		}
		cs, ns := &c.sides[0], &c.sides[1]
		cs.fd, ns.fd = d.FDs[0], d.FDs[1]
		cs.pend, ns.pend = d.ClientPend, d.NodePend
		l.add(c)
	}
}
