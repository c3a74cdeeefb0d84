// Package schedpolicy sets the Linux scheduling policy that every thread of the process
// runs under: SCHED_BATCH for the sidecar by default, or the kernel's default, SCHED_OTHER.
//
// Why a relay wants SCHED_BATCH: a thread under it does not preempt the thread that woke it.
// When the node (or the application) writes a burst of frames to the sidecar, a sidecar
// under SCHED_OTHER is woken by the first write and, on a busy core, takes the CPU from the
// writer at once: it reads one frame, forwards it, sleeps, and is woken again by the next
// write. Under SCHED_BATCH the writer finishes its burst (or its time slice) first, and the
// sidecar takes the whole burst in one read and one write. The work is the same; the
// wake-ups, context switches and system calls per request are fewer, for the sidecar and
// for the processes around it. The kernel still gives the sidecar its fair share of the CPU,
// and on a core with nothing else to run it runs at once; what it gives up is only the
// right to interrupt another thread the moment a packet arrives.
package schedpolicy

import (
	"errors"
	"fmt"
)

// Policy is a scheduling policy for the threads of the process. The zero value is Batch.
type Policy uint8

const (
	// Batch is SCHED_BATCH: the threads never preempt another thread on wake-up.
	Batch Policy = iota
	// Normal is SCHED_OTHER, the kernel's default, the policy of a process that sets none.
	Normal
)

// String returns the name that Parse takes.
func (p Policy) String() string {
	switch p {
	case Batch:
		return "batch"
	case Normal:
		return "normal"
	}
	return fmt.Sprintf("Policy(%d)", uint8(p))
}

// KernelName returns the kernel's name for the policy, as sched(7) gives it.
func (p Policy) KernelName() string {
	switch p {
	case Batch:
		return "SCHED_BATCH"
	case Normal:
		return "SCHED_OTHER"
	}
	return p.String()
}

// Parse returns the policy named s: batch or normal.
func Parse(s string) (Policy, error) {
	switch s {
	case "batch":
		return Batch, nil
	case "normal":
		return Normal, nil
	}
	return 0, fmt.Errorf("%q is not a scheduling policy: want batch (SCHED_BATCH, the default) or normal (SCHED_OTHER)", s)
}

// ErrUnsupported is returned by Apply where the operating system has no such policies.
var ErrUnsupported = errors.New("scheduling policies are set on Linux only")
