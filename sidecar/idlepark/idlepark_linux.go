package idlepark

import (
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Parker watches the sockets of parked sides in an epoll set of its own, one goroutine
// for the process, and looks every Idle for connections to park (package sidecar's
// park.go says how a connection parks). A
// socket is added and removed through its RawConn's Control, which keeps the descriptor
// open meanwhile, so that a socket closed and its number reused cannot be mistaken for it;
// the epoll data is a token, never the descriptor. Its methods are safe for concurrent use.
type Parker struct {
	epfd int
	idle atomic.Int64 // how long a connection has nothing to do before it parks, in ns

	mu     sync.Mutex
	conns  map[Parkable]struct{} // the connections that may park
	parked map[uint64]parkedSide
	next   uint64 // the last token given
}

type parkedSide struct {
	c Parkable
	s int
}

var (
	parkerOnce    sync.Once
	processParker *Parker // nil when epoll is not to be had
)

// Process returns the process's parker, started on first use, or nil.
func Process() *Parker {
	parkerOnce.Do(func() {
		epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			return
		}
		pk := &Parker{epfd: epfd, conns: make(map[Parkable]struct{}), parked: make(map[uint64]parkedSide)}
		pk.idle.Store(int64(DefaultIdle))
		processParker = pk
		go pk.run()
	})
	return processParker
}

// SetIdle sets how long a connection has nothing to do before its sides park (between one
// and two of d after its last frame), and returns the one it replaces.
func (pk *Parker) SetIdle(d time.Duration) time.Duration {
	return time.Duration(pk.idle.Swap(int64(d)))
}

// Add has the parker look at c every Idle.
func (pk *Parker) Add(c Parkable) {
	pk.mu.Lock()
	pk.conns[c] = struct{}{}
	pk.mu.Unlock()
}

// Remove ends the parker's looks at c.
func (pk *Parker) Remove(c Parkable) {
	pk.mu.Lock()
	delete(pk.conns, c)
	pk.mu.Unlock()
}

// Watch adds the socket of c's side s to the set, for one readiness, and returns its
// token; it reports false when the socket could not be added (it is closed).
func (pk *Parker) Watch(c Parkable, s int, rc syscall.RawConn) (uint64, bool) {
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

// Unwatch takes the socket of parking tok out of the set.
func (pk *Parker) Unwatch(tok uint64, rc syscall.RawConn) {
	pk.forget(tok)
	rc.Control(func(fd uintptr) { unix.EpollCtl(pk.epfd, unix.EPOLL_CTL_DEL, int(fd), nil) })
}

func (pk *Parker) forget(tok uint64) {
	pk.mu.Lock()
	delete(pk.parked, tok)
	pk.mu.Unlock()
}

// run is the parker's goroutine: it starts the sides whose sockets are ready, and looks
// for connections to park every Idle.
func (pk *Parker) run() {
	events := make([]unix.EpollEvent, 128)
	var conns []Parkable
	last := time.Now()
	for {
		every := time.Duration(pk.idle.Load())
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
				ps.c.Unpark(ps.s, tok)
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
			c.AskPark()
		}
		clear(conns)
	}
}
