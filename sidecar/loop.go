//go:build linux

package sidecar

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/tracing"
)

// The event loop carries plaintext TCP connections once they are open (see the package
// doc). A loop is one goroutine locked to its OS thread around a level-triggered epoll set;
// it owns the sockets of its connections (duplicated file descriptors, taken from the
// runtime's poller) and everything per connection that the two goroutines of the goroutine
// path own. It never blocks but in epoll_wait.

// loopReadSize is the shared read buffer of a loop: one read takes up to this much of what
// a socket holds.
const loopReadSize = 64 << 10

// side is one socket of a connection in a loop.
type side struct {
	c      *conn
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
}

// loop is one event loop.
type loop struct {
	epfd   int
	wakefd int // an eventfd: other goroutines post commands and write to it

	mu   sync.Mutex
	cmds []loopCmd

	// Loop goroutine only.
	sides   map[int32]*side
	closing []*conn // connections writing their last frames, by loopDeadline
	waiting []*side // client sides waiting for the budget of frames held whole
	rbuf    []byte
	wbuf    []byte
	tickets []tracing.Ticket
	events  []unix.EpollEvent
}

type loopCmdKind uint8

const (
	cmdAdd loopCmdKind = iota
	cmdDrain
	cmdClose
)

type loopCmd struct {
	kind loopCmdKind
	c    *conn
}

var (
	loopsOnce sync.Once
	loopsErr  error
	loops     []*loop
	loopNext  atomic.Uint32
)

// pickLoop returns a loop for a new connection, starting the loops on first use: one per
// two of GOMAXPROCS (at least one), as the node and the clients need CPU too and one loop
// serving more sockets per wake-up does more per system call; TRACECAR_EVENT_LOOPS=n
// overrides that.
func pickLoop() (*loop, error) {
	loopsOnce.Do(func() {
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
				loopsErr = err
				return
			}
			loops = append(loops, l)
			go l.run()
		}
	})
	if loopsErr != nil {
		return nil, loopsErr
	}
	return loops[int(loopNext.Add(1))%len(loops)], nil
}

func newLoop() (*loop, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	wfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wfd)}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wfd, &ev); err != nil {
		unix.Close(epfd)
		unix.Close(wfd)
		return nil, fmt.Errorf("epoll_ctl: %w", err)
	}
	return &loop{
		epfd:   epfd,
		wakefd: wfd,
		sides:  make(map[int32]*side),
		rbuf:   make([]byte, loopReadSize),
		events: make([]unix.EpollEvent, 128),
	}, nil
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
func (c *conn) toLoop() bool {
	if _, ok := c.client.(*net.TCPConn); !ok {
		return false
	}
	if _, ok := c.node.(*net.TCPConn); !ok {
		return false
	}
	l, err := pickLoop()
	if err != nil {
		c.log.Warn().Err(err).Msg("event loop unavailable: using goroutines")
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
	cs, ns := &c.sides[0], &c.sides[1]
	*cs = side{c: c, fd: cfd, client: true, peer: ns}
	*ns = side{c: c, fd: nfd, peer: cs}
	if n := c.cr.Buffered(); n > 0 {
		b, _ := c.cr.Peek(n)
		cs.pend = append([]byte(nil), b...)
	}
	c.cr, c.toClient = nil, nil // the loop's buffers serve from here on
	c.lp = l
	l.post(loopCmd{kind: cmdAdd, c: c})
	return true
}

// inLoop reports whether the connection was moved to a loop; c.mu must be held.
func (c *conn) inLoop() bool { return c.lp != nil }

// postLoop asks the connection's loop to drain or close it.
func (c *conn) postLoop(kind loopCmdKind) { c.lp.post(loopCmd{kind: kind, c: c}) }

// loopState is what a connection in a loop holds: the loop, and its two sockets. Where the
// connection is on its way to closed is conn.state, as on the goroutine path.
type loopState struct {
	lp    *loop
	sides [2]side // the client, the node
	// lastDeadline bounds the writing of the last frames, once the connection is ending.
	lastDeadline time.Time
}

// run is the loop goroutine.
func (l *loop) run() {
	runtime.LockOSThread()
	for {
		n, err := l.wait()
		if err != nil {
			if err != unix.EINTR {
				panic(fmt.Sprintf("sidecar: epoll_wait: %v", err))
			}
			// The runtime's preemption signal can interrupt every wait before its timeout
			// (it is sent to a goroutine that runs long, and a raw wait looks like one), so
			// the deadlines below are checked after an interrupted wait too.
			n = 0
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
			s := l.sides[ev.Fd]
			if s == nil {
				continue // closed earlier in this batch
			}
			if ev.Events&unix.EPOLLOUT != 0 {
				l.writeOut(s)
				if l.sides[ev.Fd] != s {
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
		}
	}
}

// wait returns the ready events. It blocks in epoll_wait without telling the runtime
// (a raw system call): the loop keeps its P, so its thread is neither handed off nor
// woken by sysmon, which measured as most of the sidecar's CPU at moderate load when
// waiting as an ordinary system call. That is why pickLoop adds a P per loop for the rest
// of the process. The runtime's preemption signal interrupts the wait (EINTR), so a stop
// of the world (for GC) is not held up; the timeout bounds the wait anyway.
func (l *loop) wait() (int, error) {
	timeout := loopWaitMillis
	if len(l.waiting) > 0 {
		timeout = int(budgetPoll / time.Millisecond)
	}
	r, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(l.epfd), uintptr(unsafe.Pointer(&l.events[0])), uintptr(len(l.events)), uintptr(timeout), 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// loopWaitMillis bounds one wait of an idle loop; budgetPoll bounds it while a connection
// waits for the budget of frames held whole.
const loopWaitMillis = 1000

// sysRead and sysWrite are read(2) and write(2) on a non-blocking socket: they never
// block, so they skip the runtime's syscall bookkeeping (entersyscall, and exitsyscall's
// wake-up of another thread), which costs more than the call itself at a frame a time.
func sysRead(fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

func sysWrite(fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return -1, e
	}
	return int(r), nil
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
		}
	}
}

// add registers a connection's sockets, and forwards the frames its client reader held.
func (l *loop) add(c *conn) {
	cs, ns := &c.sides[0], &c.sides[1]
	for _, s := range []*side{cs, ns} {
		s.events = unix.EPOLLIN
		ev := unix.EpollEvent{Events: s.events, Fd: int32(s.fd)}
		if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, s.fd, &ev); err != nil {
			c.log.Warn().Err(err).Msg("event loop: epoll_ctl")
			l.close(c)
			return
		}
		l.sides[int32(s.fd)] = s
	}
	if c.draining() {
		l.drain(c)
	}
	if len(cs.pend) > 0 && c.getState() != stateClosed {
		data := cs.pend
		cs.pend = nil
		l.frames(cs, data)
	}
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

// read takes what socket s holds and forwards every whole frame in it.
func (l *loop) read(s *side) {
	buf := l.rbuf
	have := 0
	gather := s.need > len(buf)
	if gather {
		// A frame larger than the shared buffer is gathered in pend, which grows as its
		// bytes arrive, by doubling (as cql.AppendRead), and never ahead of them: a length
		// field that lies costs no more memory than the bytes actually sent.
		s.pend = gatherRoom(s.pend, s.need)
		buf = s.pend[:cap(s.pend)]
		have = len(s.pend)
	} else {
		have = copy(buf, s.pend)
	}
	n, err := sysRead(s.fd, buf[have:])
	switch {
	case err == unix.EAGAIN || err == unix.EINTR:
		return
	case err != nil || n == 0:
		l.readEnded(s, err)
		return
	}
	if gather && have+n < s.need {
		s.pend = s.pend[:have+n] // not whole yet
		return
	}
	s.pend = s.pend[:0]
	l.frames(s, buf[:have+n])
}

// gatherRoom returns pend, the start of a frame of need bytes, with room for more of it:
// when pend is full it is copied to a buffer twice as large (at least loopReadSize, at most
// need), so that its capacity stays within twice the bytes received.
func gatherRoom(pend []byte, need int) []byte {
	if len(pend) < cap(pend) {
		return pend
	}
	nb := make([]byte, len(pend), min(need, max(2*cap(pend), loopReadSize)))
	copy(nb, pend)
	return nb
}

// frames forwards the whole frames at the head of data, read from s, to its peer, and keeps
// the rest in s.pend.
func (l *loop) frames(s *side, data []byte) {
	c := s.c
	d := s.peer
	out := d.out
	direct := len(out) == 0
	if direct {
		out = l.wbuf[:0]
	}
	tickets := l.tickets[:0]
	// One clock read per read from the node, shared by the responses it brought: their
	// arrival, for tracing, statement statistics and the added latency.
	var arrived int64
	if !s.client && c.p.metrics != nil {
		arrived = tracing.Now()
	}
	pos := 0
	var bad *protocolError
	var nodeErr error
	drained := false
	need := 0 // the size of a frame whose header is in and whose rest is not
	for len(data)-pos >= cql.HeaderSize {
		hb := data[pos : pos+cql.HeaderSize]
		var h cql.Header
		var err error
		if s.client {
			h, err = c.requestHeader(hb)
			if err != nil {
				errors.As(err, &bad)
				break
			}
		} else if h, err = c.responseHeader(hb); err != nil {
			nodeErr = err
			break
		}
		n := cql.HeaderSize + int(h.Length)
		if len(data)-pos < n {
			need = n
			break
		}
		frame := data[pos : pos+n]
		pos += n
		if e := c.log.Trace(); e != nil {
			from := "frame from node"
			if s.client {
				from = "frame from client"
			}
			e.Str("op", h.Opcode.String()).Int16("stream", h.Stream).Int("bytes", n).Msg(from)
		}
		if s.client {
			if t := c.request(h, frame, n); t.Events() {
				tickets = append(tickets, t)
			}
			out = append(out, frame...)
		} else {
			var req inflight
			left := -1
			if h.Stream >= 0 {
				req, _, left = c.streams.take(h.Stream)
			}
			if arrived == 0 && req.stat.Active() {
				arrived = tracing.Now()
			}
			f, done := c.response(h, frame, req, arrived)
			if done.Events() {
				tickets = append(tickets, done)
			}
			inc(&c.counters.bytesOut, uint64(len(f)))
			out = append(out, f...)
			c.queued(req, arrived)
			if left == 0 && c.draining() {
				drained = true
			}
		}
	}
	// A frame gathered whole was forwarded: its share of the budget goes back.
	if s.held > 0 && pos > 0 {
		c.p.held.release(s.held)
		s.held = 0
	}
	// Keep the rest for the next read.
	rest := data[pos:]
	s.need = need
	if cap(s.pend) > maxKeptBuffer && len(rest) <= loopReadSize {
		s.pend = nil // a large frame's buffer is not kept
	}
	s.pend = append(s.pend[:0], rest...)
	if s.client && s.need > len(l.rbuf) && s.held == 0 && bad == nil {
		l.holdFrame(s)
	}
	if direct {
		l.wbuf = out[:0]
		if cap(l.wbuf) > maxKeptBuffer {
			l.wbuf = nil
		}
	}
	l.tickets = tickets[:0]
	if len(out) > 0 {
		l.send(d, out, direct, tickets)
		if c.getState() == stateClosed {
			return
		}
	}
	switch {
	case bad != nil:
		l.end(c, bad)
	case nodeErr != nil:
		l.end(c, fmt.Errorf("%w: %w", errNodeLost, nodeErr))
	case drained && len(d.out) == 0:
		l.close(c)
	}
}

// send writes out to d. When d takes only part of it, the rest waits in d.out for
// EPOLLOUT, and reading from d's peer stops until it is written. direct says that out is the
// loop's scratch buffer rather than d.out. tickets are the traced frames in out: tracing
// is told once they are written.
func (l *loop) send(d *side, out []byte, direct bool, tickets []tracing.Ticket) {
	if !direct {
		// d.out was already waiting for EPOLLOUT: just queue behind it.
		d.out = out
		d.tickets = append(d.tickets, tickets...)
		return
	}
	n, err := sysWrite(d.fd, out)
	if err != nil && err != unix.EAGAIN && err != unix.EINTR {
		l.writeFailed(d, err)
		return
	}
	n = max(n, 0)
	if n == len(out) {
		d.c.wrote(tickets, d.client)
		return
	}
	d.out = append(d.out[:0], out[n:]...)
	d.tickets = append(d.tickets[:0], tickets...)
	l.setEvents(d)
	d.peer.paused = true
	l.setEvents(d.peer)
}

// writeOut writes the output that d holds, on EPOLLOUT.
func (l *loop) writeOut(d *side) {
	if len(d.out) == 0 {
		l.setEvents(d)
		return
	}
	n, err := sysWrite(d.fd, d.out)
	if err != nil && err != unix.EAGAIN && err != unix.EINTR {
		l.writeFailed(d, err)
		return
	}
	n = max(n, 0)
	if n < len(d.out) {
		d.out = d.out[:copy(d.out, d.out[n:])]
		return
	}
	d.out = d.out[:0]
	if cap(d.out) > maxKeptBuffer {
		d.out = nil
	}
	c := d.c
	c.wrote(d.tickets, d.client)
	clear(d.tickets)
	d.tickets = d.tickets[:0]
	l.setEvents(d)
	switch {
	case c.getState() == stateEnding:
		l.close(c) // the last frames are out
		return
	case d.client && c.draining() && c.streams.len() == 0:
		l.close(c)
		return
	}
	src := d.peer
	if src.paused && !src.budgetWait && !(src.client && c.draining()) {
		src.paused = false
		l.setEvents(src)
	}
}

// writeFailed handles a write error on d: the node is lost, or the client is gone.
func (l *loop) writeFailed(d *side, err error) {
	if d.client {
		l.close(d.c)
		return
	}
	l.end(d.c, fmt.Errorf("%w: %w", errNodeWrite, err))
}

// readEnded handles the end of reading s: EOF or an error.
func (l *loop) readEnded(s *side, err error) {
	c := s.c
	if !s.client {
		if err == nil {
			err = io.EOF
		}
		l.end(c, fmt.Errorf("%w: %w", errNodeLost, err))
		return
	}
	if err != nil {
		c.log.Debug().Err(err).Msg("client read")
	}
	l.close(c)
}

// end ends the connection for cause, unless it is ending already (the first cause
// stands): the connection moves to ending, the node side stops, and the last frames that
// the cause calls for (lastFrames) go to the client after what it still holds; the
// connection closes once they are out.
func (l *loop) end(c *conn, cause error) {
	c.mu.Lock()
	ending := c.end(cause)
	c.mu.Unlock()
	if !ending {
		return
	}
	cs, ns := &c.sides[0], &c.sides[1]
	cs.paused, ns.paused = true, true
	ns.out = nil
	l.setEvents(ns)
	cs.out = c.lastFrames(cs.out, cause)
	if len(cs.out) == 0 {
		l.close(c)
		return
	}
	n, err := sysWrite(cs.fd, cs.out)
	if err != nil && err != unix.EAGAIN && err != unix.EINTR || n == len(cs.out) {
		l.close(c)
		return
	}
	cs.out = cs.out[:copy(cs.out, cs.out[max(n, 0):])]
	l.setEvents(cs)
	// The client has errWriteTimeout to take the rest, as on the goroutine path.
	c.lastDeadline = time.Now().Add(errWriteTimeout)
	l.closing = append(l.closing, c)
}

// expire closes the connections whose last frames were not taken in time. The loop's wait
// is bounded, so it runs at least every loopWaitMillis.
func (l *loop) expire() {
	now := time.Now()
	kept := l.closing[:0]
	for _, c := range l.closing {
		switch {
		case c.getState() == stateClosed:
		case now.After(c.lastDeadline):
			l.close(c)
		default:
			kept = append(kept, c)
		}
	}
	clear(l.closing[len(kept):])
	l.closing = kept
}

// holdFrame charges the client frame that s is about to gather whole (larger than the
// read buffer) to the proxy-wide budget of frames held whole, as readWhole does on the
// goroutine path. While the budget has no room, s is not read: its frame stays in the
// client's socket and the client's writes block, which is the backpressure; retryBudget
// tries again every budgetPoll.
func (l *loop) holdFrame(s *side) {
	if s.c.p.held.tryAcquire(int64(s.need)) {
		s.held = s.need
		return
	}
	s.budgetWait = true
	s.paused = true
	l.setEvents(s)
	l.waiting = append(l.waiting, s)
}

// retryBudget resumes the connections waiting for the budget that now fits their frame.
// A connection closed or drained meanwhile stops waiting (a drained one is not read again).
func (l *loop) retryBudget() {
	kept := l.waiting[:0]
	for _, s := range l.waiting {
		c := s.c
		switch {
		case c.draining(): // or ending, or closed
			s.budgetWait = false
		case c.p.held.tryAcquire(int64(s.need)):
			s.held, s.budgetWait = s.need, false
			if len(s.peer.out) == 0 {
				s.paused = false
				l.setEvents(s)
			}
		default:
			kept = append(kept, s)
		}
	}
	clear(l.waiting[len(kept):])
	l.waiting = kept
}

// drain stops reading the client; the connection closes when its last request in flight
// is answered. A connection ending closes once its last frames are out.
func (l *loop) drain(c *conn) {
	if c.getState() >= stateEnding {
		return
	}
	cs := &c.sides[0]
	cs.paused = true
	l.setEvents(cs)
	if c.streams.len() == 0 && len(cs.out) == 0 {
		l.close(c)
	}
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

// close ends a connection in the loop, from any state: both sockets are closed and serve
// returns.
func (l *loop) close(c *conn) {
	if !c.advance(stateClosed) {
		return
	}
	for i := range c.sides {
		s := &c.sides[i]
		if l.sides[int32(s.fd)] == s {
			unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, s.fd, nil)
			delete(l.sides, int32(s.fd))
		}
		discard(s.fd, l.rbuf)
		unix.Close(s.fd)
		s.pend, s.out, s.tickets = nil, nil, nil
		if s.held > 0 {
			c.p.held.release(s.held)
			s.held = 0
		}
	}
	close(c.done)
	// The loop never gives up its P by itself (see wait), so a goroutine it readies could
	// wait in that P's run queue until another P steals it: yield, so that the
	// connection's goroutine in serve runs and the connection is unregistered.
	runtime.Gosched()
}
