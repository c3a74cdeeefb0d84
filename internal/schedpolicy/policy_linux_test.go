//go:build linux

package schedpolicy

import (
	"os"
	"runtime"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// TestApply sets SCHED_BATCH on the test process, checks that every thread has it,
// including threads the runtime starts afterwards, and sets SCHED_OTHER back.
func TestApply(t *testing.T) {
	before := mustThreads(t)
	t.Cleanup(func() {
		if _, err := Apply(Normal); err != nil {
			t.Errorf("Apply(Normal): %v", err)
		}
		for tid, p := range mustThreads(t) {
			if p != unix.SCHED_NORMAL {
				t.Errorf("after Apply(Normal), thread %d has policy %d; want %d (SCHED_OTHER)", tid, p, unix.SCHED_NORMAL)
			}
		}
	})
	n, err := Apply(Batch)
	if err != nil {
		t.Fatalf("Apply(Batch): %v", err)
	}
	if n == 0 {
		t.Errorf("Apply(Batch) changed no thread; the process had %d under SCHED_OTHER", len(before))
	}
	for tid, p := range mustThreads(t) {
		if p != unix.SCHED_BATCH {
			t.Errorf("thread %d has policy %d; want %d (SCHED_BATCH)", tid, p, unix.SCHED_BATCH)
		}
	}
	if n, err := Apply(Batch); err != nil || n != 0 {
		t.Errorf("Apply(Batch) again = %d, %v; want 0 threads changed", n, err)
	}

	// Goroutines locked to their threads, each waiting, more of them than there are threads,
	// make the runtime start new threads: those must have the policy too.
	locked := len(mustThreads(t)) + 4
	tids := make(chan int, locked)
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range locked {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			tids <- unix.Gettid()
			<-release
		}()
	}
	fresh := 0
	for range locked {
		tid := <-tids
		if _, ok := before[tid]; !ok {
			fresh++
		}
		attr, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			t.Fatalf("sched_getattr of thread %d: %v", tid, err)
		}
		if attr.Policy != unix.SCHED_BATCH {
			t.Errorf("thread %d, started after Apply, has policy %d; want %d (SCHED_BATCH)", tid, attr.Policy, unix.SCHED_BATCH)
		}
	}
	close(release)
	wg.Wait()
	if fresh == 0 {
		t.Fatalf("no thread was started after Apply: the test shows nothing about inheritance")
	}
}

// TestApplyKeepsNice checks that a thread's nice value survives the change of policy.
func TestApplyKeepsNice(t *testing.T) {
	t.Cleanup(func() { Apply(Normal) })
	// The thread whose nice value is raised is ended with the goroutine (it exits still
	// locked), so that no other test runs on it.
	type result struct {
		tid, nice int
		policy    uint32
		err       error
	}
	done := make(chan result)
	go func() {
		runtime.LockOSThread()
		tid := unix.Gettid()
		if err := unix.Setpriority(unix.PRIO_PROCESS, tid, 5); err != nil {
			done <- result{err: err}
			return
		}
		if _, err := Apply(Batch); err != nil {
			done <- result{err: err}
			return
		}
		attr, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			done <- result{err: err}
			return
		}
		done <- result{tid: tid, nice: int(attr.Nice), policy: attr.Policy}
	}()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.policy != unix.SCHED_BATCH || r.nice != 5 {
		t.Errorf("thread %d: policy %d, nice %d; want %d (SCHED_BATCH), nice 5", r.tid, r.policy, r.nice, unix.SCHED_BATCH)
	}
}

func mustThreads(tb testing.TB) map[int]uint32 {
	tb.Helper()
	m, err := Threads(os.Getpid())
	if err != nil {
		tb.Fatal(err)
	}
	return m
}
