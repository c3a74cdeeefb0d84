//go:build linux

package sidecar

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// How a loop waits for its sockets, and what it does when the wait fails.
//
// A busy loop waits in epoll_wait without telling the runtime (a raw system call): it keeps
// its P, so its thread is neither handed off nor woken, which measured as most of the
// sidecar's CPU at moderate load when waiting as an ordinary system call. That is why
// loopGroup.start adds a P per loop for the rest of the process. The runtime's preemption
// signal interrupts the wait (EINTR), so a stop of the world (for GC) is not held up.
//
// A raw wait lasts at most spin. One that sees nothing in that time makes the loop idle,
// and an idle loop parks on the runtime's poller (park) until its next event: its P goes
// back at once, and with every P idle sysmon sleeps instead of polling every 20 µs, and
// nothing preempts the loop. Holding the P for the raw wait's last milliseconds (4 ms, and
// before that an ordinary blocking epoll_wait, which keeps the P too until sysmon takes
// it 10 ms later) was most of the sidecar's CPU at low rates: 500 µs an operation at
// 50 op/s against HAProxy's 75 (`perf`: sysmon's wake-ups, and the preemption signal,
// the interrupted wait and the rescheduling).

// openEpoll makes the loop's epoll set, with the wake-up eventfd in it, and the gate through
// which the runtime's poller watches it (park).
func (l *loop) openEpoll() error {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("epoll_create1: %w", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(l.wakefd)}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, l.wakefd, &ev); err != nil {
		unix.Close(epfd)
		return fmt.Errorf("epoll_ctl: %w", err)
	}
	l.epfd = epfd
	l.openGate()
	return nil
}

// openGate makes the gate: a second epoll set that holds the loop's, registered with the
// runtime's poller. An epoll set is readable while it has events, so the runtime can wait
// on it as on a socket. The loop's set is in the gate only while the loop is parked
// (armed): the runtime's poller is woken by the gate, and it would be woken by every event
// of a busy loop too (one more thread woken per event) if the loop's set stayed in it.
// Without a gate (an error: the loop works without one), an idle loop waits in an ordinary
// blocking epoll_wait.
func (l *loop) openGate() {
	gfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return
	}
	ev := unix.EpollEvent{Fd: int32(l.epfd)} // disarmed: no events
	if unix.EpollCtl(gfd, unix.EPOLL_CTL_ADD, l.epfd, &ev) != nil || unix.SetNonblock(gfd, true) != nil {
		unix.Close(gfd)
		return
	}
	// os.NewFile registers a non-blocking descriptor with the runtime's poller.
	f := os.NewFile(uintptr(gfd), "event loop")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return
	}
	l.gate, l.gateFD, l.gateConn, l.armed, l.deadline = f, gfd, rc, false, false
}

// closeEpoll closes the loop's epoll set and its gate.
func (l *loop) closeEpoll() {
	if l.gate != nil {
		l.gate.Close()
		l.gate, l.gateConn = nil, nil
	}
	unix.Close(l.epfd)
	l.epfd = -1
}

// wait returns the ready events (see above).
func (l *loop) wait() (int, error) {
	if l.idle && l.gateConn != nil {
		n, err := l.park()
		l.idle = n == 0 && err == nil
		return n, err
	}
	spin := l.spin
	if len(l.waiting) > 0 {
		spin = min(spin, budgetPoll)
	}
	var r uintptr
	var e unix.Errno
	if l.idle {
		// No gate: an ordinary blocking wait, bounded for expire and retryBudget.
		timeout := loopWaitMillis
		if len(l.waiting) > 0 {
			timeout = int(budgetPoll / time.Millisecond)
		}
		r, _, e = unix.Syscall6(unix.SYS_EPOLL_PWAIT, uintptr(l.epfd), uintptr(unsafe.Pointer(&l.events[0])), uintptr(len(l.events)), uintptr(timeout), 0, 0)
	} else {
		ts := unix.NsecToTimespec(int64(spin))
		r, _, e = unix.RawSyscall6(unix.SYS_EPOLL_PWAIT2, uintptr(l.epfd), uintptr(unsafe.Pointer(&l.events[0])), uintptr(len(l.events)), uintptr(unsafe.Pointer(&ts)), 0, 0)
	}
	l.idle = r == 0 && e == 0
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// park waits for the loop's first events on the runtime's poller, through the gate: the
// loop's set is armed in the gate, checked once (an event may have come meanwhile), and the
// goroutine parks until the gate is readable; the set is disarmed again once there are
// events. While connections wait for a deadline (expire, retryBudget) the park is bounded.
func (l *loop) park() (int, error) {
	var d time.Time
	switch {
	case len(l.waiting) > 0:
		d = time.Now().Add(budgetPoll)
	case len(l.closing) > 0:
		d = time.Now().Add(loopWaitMillis * time.Millisecond)
	}
	if !d.IsZero() || l.deadline {
		l.gate.SetReadDeadline(d)
		l.deadline = !d.IsZero()
	}
	if err := l.arm(true); err != nil {
		return 0, err
	}
	err := l.gateConn.Read(l.peek)
	n, e := l.peeked, l.peekErr
	if aerr := l.arm(false); aerr != nil && e == 0 {
		return 0, aerr
	}
	switch {
	case e != 0:
		return 0, e
	case errors.Is(err, os.ErrDeadlineExceeded):
		return 0, nil
	case err != nil:
		return 0, err
	}
	return n, nil
}

// peekEvents is park's check of the loop's set, while parking and once woken: it reports
// whether the set has events (in peeked) or its wait failed (peekErr). It is a method value
// made once (peek), as a closure made per park would be allocated per park.
func (l *loop) peekEvents(uintptr) bool {
	r, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(l.epfd), uintptr(unsafe.Pointer(&l.events[0])), uintptr(len(l.events)), 0, 0, 0)
	l.peeked, l.peekErr = int(r), e
	return r > 0 || e != 0
}

// arm puts the loop's set in the gate (on) or takes it out.
func (l *loop) arm(on bool) error {
	if l.armed == on {
		return nil
	}
	var ev unix.EpollEvent
	ev.Fd = int32(l.epfd)
	if on {
		ev.Events = unix.EPOLLIN
	}
	if err := unix.EpollCtl(l.gateFD, unix.EPOLL_CTL_MOD, l.epfd, &ev); err != nil {
		return err
	}
	l.armed = on
	return nil
}

// loopWaitMillis bounds one wait of an idle loop without a gate, and a park while
// connections wait for a deadline; budgetPoll bounds it while a connection waits for the
// budget of frames held whole.
const loopWaitMillis = 1000

// defaultLoopSpin is how long a busy loop waits raw before it parks (wait).
const defaultLoopSpin = 4 * time.Millisecond

// loopSpin returns the raw wait of a busy loop: defaultLoopSpin, or TRACECAR_LOOP_SPIN
// (a duration; 0 parks at once) for measurements.
func loopSpin() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("TRACECAR_LOOP_SPIN")); err == nil && d >= 0 {
		return d
	}
	return defaultLoopSpin
}

// loopFailures counts the waits of the process's loops that failed (fail).
var loopFailures atomic.Uint64

// LoopFailures returns how many times an event loop's epoll_wait failed with an error
// other than EINTR, in this process: each time the loop closed its connections and went on
// with a new epoll set.
func LoopFailures() uint64 { return loopFailures.Load() }

// fail handles an error of the loop's wait other than EINTR, which says that the epoll set
// itself is unusable: the loop closes every connection it carries (their clients see the
// connection end, as when the node goes away, and reconnect), counts and logs the failure,
// and starts over with a new epoll set, so that the connections that come next are served.
// While no set can be made the loop takes no connection (pick), and tries again every
// second.
func (l *loop) fail(err error) {
	loopFailures.Add(1)
	l.down.Store(true)
	cause := fmt.Errorf("event loop: epoll_wait: %w", err)
	for _, s := range l.sides {
		if s != nil && s.client {
			s.c.pipe.Warn().Err(cause).Msg("connection closed: its event loop failed")
			l.close(s.c)
		}
	}
	for i := range l.sides {
		if s := l.sides[i]; s != nil { // a side whose connection is not in the table whole
			l.close(s.c)
		}
	}
	clear(l.closing)
	l.closing = l.closing[:0]
	clear(l.waiting)
	l.waiting = l.waiting[:0]
	l.idle = false
	for {
		l.closeEpoll()
		if oerr := l.openEpoll(); oerr == nil {
			break
		}
		time.Sleep(time.Second)
	}
	// Commands posted meanwhile are read once the new set reports the eventfd.
	l.down.Store(false)
}
