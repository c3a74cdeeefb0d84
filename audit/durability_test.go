package audit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// disk models what survives a power loss: of each file, the bytes it had at its last
// fsync; of the directory, the names it held at its last fsync. It records the File sink's
// fsyncs through its fsync hook, which still syncs for real.
type disk struct {
	mu        sync.Mutex
	dir       string
	synced    map[string]int64 // file → size at its last fsync
	names     map[string]bool  // names in the directory at its last fsync
	fileSyncs int
	dirSyncs  int
}

func newDisk(dir string) *disk {
	return &disk{dir: dir, synced: map[string]int64{}, names: map[string]bool{}}
}

func (d *disk) fsync(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if fi.IsDir() {
		d.dirSyncs++
		ents, err := os.ReadDir(f.Name())
		if err != nil {
			return err
		}
		d.names = map[string]bool{}
		for _, e := range ents {
			d.names[e.Name()] = true
		}
	} else {
		d.fileSyncs++
		d.synced[f.Name()] = fi.Size()
	}
	return f.Sync()
}

// afterPowerLoss returns the records a power loss now would leave: the audit files whose
// names the directory had synced, each cut to the size it was synced at.
func (d *disk) afterPowerLoss(tb testing.TB) []Record {
	tb.Helper()
	files, err := Files(d.dir)
	if err != nil {
		tb.Fatal(err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []Record
	for _, name := range files {
		if !d.names[filepath.Base(name)] {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			tb.Fatal(err)
		}
		b = b[:min(int64(len(b)), d.synced[name])]
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			var r Record
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				tb.Fatalf("%s after a power loss: line %q: %v", name, sc.Text(), err)
			}
			out = append(out, r)
		}
	}
	return out
}

// checkPrefix fails unless got is the first len(got) records of rec(0), rec(1), ….
func checkPrefix(tb testing.TB, got []Record) {
	tb.Helper()
	for i, r := range got {
		if r.Operation != rec(i).Operation {
			tb.Fatalf("record %d after a power loss: %q; want %q", i, r.Operation, rec(i).Operation)
		}
	}
}

// TestFilePowerLoss writes 95 records through a Log into files of 10 lines and simulates
// a power loss at two points, from the fsyncs the File sink made: mid-run, every file
// already rotated away survives whole (rotation syncs it, and each new file's name is
// synced in the directory); after Close, every record survives. A File whose Sync, or
// rotation's sync, or the directory's sync never runs fails it, which a kill -9 (the page
// cache kept) cannot show.
func TestFilePowerLoss(t *testing.T) {
	dir := t.TempDir()
	r0 := rec(0)
	line := int64(len(r0.AppendJSON(nil)) + 1)
	f, err := NewFile(FileConfig{Dir: dir, MaxSize: 10 * line, MaxFiles: 100})
	if err != nil {
		t.Fatal(err)
	}
	d := newDisk(dir)
	f.fsync = d.fsync
	l := Open(Config{Sync: time.Hour, Sinks: []Sink{f}}) // no interval sync during the test
	for i := range 95 {
		l.Add(rec(i))
		if i%7 == 6 { // bursts of 7, each in the files before the next: rotations mid-batch
			waitFor(t, func() bool { return len(readRecords(t, dir)) == i+1 })
		}
	}
	waitFor(t, func() bool { return len(readRecords(t, dir)) == 95 })
	files, err := Files(dir)
	if err != nil || len(files) < 9 {
		t.Fatalf("%d files, %v; want at least 9 of 10 lines", len(files), err)
	}
	cur, err := os.ReadFile(files[len(files)-1])
	if err != nil {
		t.Fatal(err)
	}
	inCurrent := bytes.Count(cur, []byte("\n"))
	mid := d.afterPowerLoss(t)
	checkPrefix(t, mid)
	if len(mid) < 95-inCurrent {
		t.Errorf("a power loss before Close keeps %d records; want the %d of the %d files rotated away (fsyncs: %d of files, %d of the directory)",
			len(mid), 95-inCurrent, len(files)-1, d.fileSyncs, d.dirSyncs)
	}
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	after := d.afterPowerLoss(t)
	checkPrefix(t, after)
	if len(after) != 95 {
		t.Errorf("a power loss after Close keeps %d records; want 95 (fsyncs: %d of files, %d of the directory)", len(after), d.fileSyncs, d.dirSyncs)
	}
	if d.fileSyncs != len(files) || d.dirSyncs != len(files) {
		t.Errorf("%d file and %d directory fsyncs for %d files; want one of each per file (its rotation or Close, its creation)", d.fileSyncs, d.dirSyncs, len(files))
	}
}

// TestFileSyncInterval: records written while the sidecar runs reach the disk with the
// Log's sync interval, not only at Close: they survive a power loss once the interval has
// passed. A Sync that never reaches fsync waits here until the test fails.
func TestFileSyncInterval(t *testing.T) {
	dir := t.TempDir()
	f, err := NewFile(FileConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	d := newDisk(dir)
	f.fsync = d.fsync
	l := Open(Config{Sync: 10 * time.Millisecond, Sinks: []Sink{f}})
	defer l.Close(context.Background())
	for i := range 20 {
		l.Add(rec(i))
	}
	waitFor(t, func() bool { return len(d.afterPowerLoss(t)) == 20 })
	checkPrefix(t, d.afterPowerLoss(t))
}
