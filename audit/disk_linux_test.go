package audit

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/testkit/smalldisk"
)

// mustSmallDisk returns an audit directory on a full 64 KiB tmpfs, and the filler whose
// removal frees the space.
func mustSmallDisk(tb testing.TB) (dir, filler string) {
	tb.Helper()
	mnt, filler := smalldisk.Full(tb)
	return filepath.Join(mnt, "audit"), filler
}

// TestFullDiskBlock: with a full disk, the file sink fails, /readyz's error says so, and
// under block the requests adding records wait; once space is freed they resume, and every
// record is in the file once.
func TestFullDiskBlock(t *testing.T) {
	dir, filler := mustSmallDisk(t)
	f, err := NewFile(FileConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	l := Open(Config{Policy: Block, Queue: 4, Retry: 5 * time.Millisecond, Sinks: []Sink{f}})
	const n = 50
	var added atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			l.Add(rec(i))
			added.Add(1)
		}
	}()
	waitFor(t, func() bool { return l.Err() != nil && l.Status().Sinks[0].Waits > 0 })
	if err := l.Err(); !strings.Contains(err.Error(), "no space left on device") || !strings.Contains(err.Error(), "file") {
		t.Errorf("Err = %v; want the file sink and ENOSPC", err)
	}
	// The requests wait: the adder is stuck with most records not added.
	time.Sleep(50 * time.Millisecond)
	if a := added.Load(); a >= n {
		t.Fatalf("all %d records added with the disk full under block", a)
	}
	select {
	case <-done:
		t.Fatal("the adder finished with the disk full under block")
	default:
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	<-done
	waitFor(t, func() bool { return l.Err() == nil && l.Status().Sinks[0].Written == n })
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := readRecords(t, dir)
	if len(got) != n {
		t.Fatalf("%d records in the file; want %d", len(got), n)
	}
	for i, r := range got {
		if r.Operation != rec(i).Operation {
			t.Fatalf("record %d: %q; want %q (none lost, none twice)", i, r.Operation, rec(i).Operation)
		}
	}
	if l.Dropped() != 0 {
		t.Errorf("%d dropped under block", l.Dropped())
	}
}

// TestFullDiskDrop: with a full disk under drop, adding never waits, each record lost is
// counted, Err says why, and once space is freed the sink recovers and the counts add up.
func TestFullDiskDrop(t *testing.T) {
	dir, filler := mustSmallDisk(t)
	f, err := NewFile(FileConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	l := Open(Config{Policy: Drop, Queue: 4, Retry: 5 * time.Millisecond, Sinks: []Sink{f}})
	l.Add(rec(0))
	waitFor(t, func() bool { return l.Err() != nil })
	const n = 100
	for i := 1; i < n; i++ {
		l.Add(rec(i)) // never waits: the test would hang here otherwise
	}
	st := l.Status()
	if st.Dropped == 0 || st.Sinks[0].Dropped != st.Dropped || st.Sinks[0].Waits != 0 {
		t.Errorf("status with the disk full under drop: %+v; want drops counted, no wait", st)
	}
	if !strings.Contains(st.Error, "no space left on device") || st.Sinks[0].State != "failing" {
		t.Errorf("status error %q, state %q; want ENOSPC, failing", st.Error, st.Sinks[0].State)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return l.Err() == nil })
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := readRecords(t, dir)
	if st := l.Status(); uint64(len(got))+st.Dropped != n || st.Sinks[0].Written != uint64(len(got)) {
		t.Errorf("%d in the file + %d dropped != %d (written %d)", len(got), st.Dropped, n, st.Sinks[0].Written)
	}
}

// TestFullDiskPartialBatch: a batch that only partly fits is truncated away, so that its
// retry, once there is room, writes each record once and no line is ever cut.
func TestFullDiskPartialBatch(t *testing.T) {
	dir, filler := mustSmallDisk(t)
	// One page free: less than the batch.
	if err := os.Truncate(filler, mustSize(t, filler)-4096); err != nil {
		t.Fatal(err)
	}
	f, err := NewFile(FileConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	batch := make([]Record, 40) // about 10 KiB
	for i := range batch {
		batch[i] = rec(i)
	}
	if err := f.Write(context.Background(), batch); err == nil || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("Write on a nearly full disk = %v; want ENOSPC", err)
	}
	if n := mustSize(t, f.Path()); n != 0 {
		t.Errorf("after the failed batch the file holds %d bytes; want 0 (truncated)", n)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := f.Write(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := readRecords(t, dir)
	if len(got) != len(batch) {
		t.Fatalf("%d records; want %d, each once", len(got), len(batch))
	}
	for i, r := range got {
		if r.Operation != batch[i].Operation {
			t.Fatalf("record %d: %q; want %q", i, r.Operation, batch[i].Operation)
		}
	}
}

func mustSize(tb testing.TB, name string) int64 {
	tb.Helper()
	fi, err := os.Stat(name)
	if err != nil {
		tb.Fatal(err)
	}
	return fi.Size()
}
