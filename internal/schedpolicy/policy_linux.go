//go:build linux

package schedpolicy

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// kernel returns the kernel's number for p.
func (p Policy) kernel() uint32 {
	if p == Batch {
		return unix.SCHED_BATCH
	}
	return unix.SCHED_NORMAL
}

// Apply sets p on every thread of the process and returns how many it changed. A thread
// starts with the policy of the thread that creates it, so once every thread has p, every
// thread the Go runtime starts later has it too; a pass over /proc/self/task can miss a
// thread started during it, so passes repeat until one changes nothing. Each thread keeps
// its nice value. It is safe for concurrent use, though one call at startup is its use.
//
// Moving between SCHED_OTHER and SCHED_BATCH needs no privilege. An error (a seccomp
// profile that refuses sched_setattr, say) leaves the threads changed so far with p, and
// the process works the same under either policy.
func Apply(p Policy) (changed int, err error) {
	for range 100 {
		n, err := applyOnce(p)
		changed += n
		if err != nil || n == 0 {
			return changed, err
		}
	}
	return changed, fmt.Errorf("threads kept starting while the scheduling policy was set: %d set", changed)
}

// applyOnce sets p on every thread that has another policy and returns how many it set.
func applyOnce(p Policy) (int, error) {
	want := p.kernel()
	attrs, err := threadAttrs(os.Getpid())
	if err != nil {
		return 0, err
	}
	n := 0
	for tid, attr := range attrs {
		if attr.Policy == want {
			continue
		}
		attr.Policy = want
		attr.Priority = 0
		attr.Flags = 0
		err := unix.SchedSetAttr(tid, attr, 0)
		switch {
		case errors.Is(err, unix.ESRCH):
			continue // the thread exited
		case err != nil:
			return n, fmt.Errorf("sched_setattr %s on thread %d: %w", p.KernelName(), tid, err)
		}
		n++
	}
	return n, nil
}

// Threads returns the scheduling policy of every thread of process pid, by thread id: the
// kernel's number (0 SCHED_OTHER, 3 SCHED_BATCH; sched(7)), as sched_getattr(2) gives it.
func Threads(pid int) (map[int]uint32, error) {
	attrs, err := threadAttrs(pid)
	if err != nil {
		return nil, err
	}
	m := make(map[int]uint32, len(attrs))
	for tid, attr := range attrs {
		m[tid] = attr.Policy
	}
	return m, nil
}

// threadAttrs returns the scheduling attributes of every thread of process pid, by thread
// id; a thread that exits meanwhile is left out.
func threadAttrs(pid int) (map[int]*unix.SchedAttr, error) {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return nil, fmt.Errorf("list threads: %w", err)
	}
	attrs := make(map[int]*unix.SchedAttr, len(ents))
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		attr, err := unix.SchedGetAttr(tid, 0)
		switch {
		case errors.Is(err, unix.ESRCH):
			continue // the thread exited
		case err != nil:
			return nil, fmt.Errorf("sched_getattr of thread %d: %w", tid, err)
		}
		attrs[tid] = attr
	}
	return attrs, nil
}
