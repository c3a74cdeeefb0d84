package sidecar

import (
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// parker watches the sockets of parked sides in an epoll set of its own, one goroutine
// for the process, and looks every parkIdle for connections to park (see park.go). A
// socket is added and removed through its RawConn's Control, which keeps the descriptor
// open meanwhile, so that a socket closed and its number reused cannot be mistaken for it;
// the epoll data is a token, never the descriptor.
type parker struct {
	epfd int

	mu     sync.Mutex
	conns  map[*conn]struct{} // the connections that may park
	parked map[uint64]parkedSide
	next   uint64 // the last token given
}

type parkedSide struct {
	c *conn
	s int
}

var (
	parkerOnce    sync.Once
	processParker *parker // nil when epoll is not to be had
)

// theParker returns the process's parker, started on first use, or nil.
func theParker() *parker {
	parkerOnce.Do(func() {
		epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			return
		}
		processParker = &parker{epfd: epfd, conns: make(map[*conn]struct{}), parked: make(map[uint64]parkedSide)}
		go processParker.run()
	})
	return processParker
}

func (pk *parker) add(c *conn) {
	pk.mu.Lock()
	pk.conns[c] = struct{}{}
	pk.mu.Unlock()
}

func (pk *parker) remove(c *conn) {
	pk.mu.Lock()
	delete(pk.conns, c)
	pk.mu.Unlock()
}

// watch adds the socket of c's side s to the set, for one readiness, and returns its
// token; it reports false when the socket could not be added (it is closed).
func (pk *parker) watch(c *conn, s int, rc syscall.RawConn) (uint64, bool) {
	pk.mu.Lock()
	pk.next++
	tok := pk.next
	pk.parked[tok] = parkedSide{c, s}
	pk.mu.Unlock()
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT, Fd: int32(tok), Pad: int32(tok >> 32)}
	var err error
	if cerr := rc.Control(func(fd uintptr) { err = unix.EpollCtl(pk.epfd, unix.EPOLL_CTL_ADD, int(fd), &ev) }); cerr != nil {
		err = cerr
	}
	if err != nil {
		pk.forget(tok)
		return 0, false
	}
	return tok, true
}

// unwatch takes the socket of parking tok out of the set.
func (pk *parker) unwatch(tok uint64, rc syscall.RawConn) {
	pk.forget(tok)
	rc.Control(func(fd uintptr) { unix.EpollCtl(pk.epfd, unix.EPOLL_CTL_DEL, int(fd), nil) })
}

func (pk *parker) forget(tok uint64) {
	pk.mu.Lock()
	delete(pk.parked, tok)
	pk.mu.Unlock()
}

// run is the parker's goroutine: it starts the sides whose sockets are ready, and looks
// for connections to park every parkIdle.
func (pk *parker) run() {
	events := make([]unix.EpollEvent, 128)
	var conns []*conn
	last := time.Now()
	for {
		every := time.Duration(parkIdle.Load())
		n, err := unix.EpollWait(pk.epfd, events, int(every/time.Millisecond))
		if err != nil {
			n = 0 // EINTR
		}
		for _, ev := range events[:n] {
			tok := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			pk.mu.Lock()
			ps, ok := pk.parked[tok]
			pk.mu.Unlock()
			if ok {
				ps.c.mu.Lock()
				ps.c.unpark(ps.s, tok)
				ps.c.mu.Unlock()
			}
		}
		if time.Since(last) < every {
			continue
		}
		last = time.Now()
		pk.mu.Lock()
		conns = conns[:0]
		for c := range pk.conns {
			conns = append(conns, c)
		}
		pk.mu.Unlock()
		for _, c := range conns {
			c.askPark()
		}
		clear(conns)
	}
}
