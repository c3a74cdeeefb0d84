package audit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// readRecords reads every line of the audit files in dir, oldest file first.
func readRecords(tb testing.TB, dir string) []Record {
	tb.Helper()
	files, err := Files(dir)
	if err != nil {
		tb.Fatal(err)
	}
	var out []Record
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			tb.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			var r Record
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				tb.Fatalf("%s: line %q: %v", f, sc.Text(), err)
			}
			out = append(out, r)
		}
		fh.Close()
	}
	return out
}

func rec(i int) Record {
	return Record{EventTime: time.Date(2026, 12, 6, 21, 0, 0, i, time.UTC), Node: "127.0.0.1:9042", Source: "127.0.0.1:5000",
		Username: "alice", Category: "DML", Operation: fmt.Sprintf("INSERT INTO ks.t (k) VALUES (?) -- %d", i),
		Keyspace: "ks", Table: "t", Consistency: "LOCAL_QUORUM"}
}

// TestAppendJSONIsMarshal: the file's lines are Record's JSON, as encoding/json writes it
// (without HTML escaping).
func TestAppendJSONIsMarshal(t *testing.T) {
	odd := []string{"", "plain", `quote " backslash \ slash /`, "<script>&amp;</script>", "tab\tnew\nline\rcr",
		"\x00\x01\x1f\x7f", "é ü 日本", "\u2028\u2029", "bad \xff\xfe utf8", "emoji 🎉"}
	for i, s := range odd {
		r := Record{EventTime: time.Date(2026, 1, 2, 3, 4, 5, i*1000, time.FixedZone("x", 3600)), Node: s, Source: s,
			Username: s, Category: s, Operation: s, Keyspace: s, Table: s, Consistency: s, Error: i%2 == 1,
			ErrorCode: int32(i * 0x1000), BatchID: s}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
		want := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		if got := (&r).AppendJSON(nil); string(got) != string(want) {
			t.Errorf("AppendJSON(%q):\n got %s\nwant %s", s, got, want)
		}
	}
}

// TestFileSink: a directory of mode 0700, files of 0600, one JSON line per record, in order,
// and each record in the file (in the OS's hands) before the Log's first sync, which comes
// only with the interval (an hour here) or Close.
func TestFileSink(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "audit")
	f, err := NewFile(FileConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	l := Open(Config{Sync: time.Hour, Sinks: []Sink{f}})
	// Two bursts, the second once the first is in the file: the one writer has then
	// finished with the first batch, a sync of its own included, were there one.
	for i := range 100 {
		l.Add(rec(i))
		if i == 49 {
			waitFor(t, func() bool { return len(readRecords(t, dir)) == 50 })
		}
	}
	waitFor(t, func() bool { return len(readRecords(t, dir)) == 100 })
	if st := l.Status().Sinks[0]; st.Syncs != 0 || st.Written != 100 {
		t.Errorf("before the interval: %+v; want 100 written and no sync", st)
	}
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := readRecords(t, dir)
	for i, r := range got {
		if w := rec(i); r.Operation != w.Operation || !r.EventTime.Equal(w.EventTime) || r.Username != "alice" {
			t.Fatalf("record %d: %+v; want %+v", i, r, w)
		}
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v, %v; want 0700", fi.Mode().Perm(), err)
	}
	files, _ := Files(dir)
	for _, name := range files {
		if fi, err := os.Stat(name); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v; want 0600", name, fi.Mode().Perm())
		}
	}
}

// TestFileRotation: files are cut at MaxSize and at most MaxFiles are kept, the newest;
// no line is lost inside the files kept, and none is cut.
func TestFileRotation(t *testing.T) {
	dir := t.TempDir()
	r0 := rec(0)
	line := len(r0.AppendJSON(nil)) + 1
	f, err := NewFile(FileConfig{Dir: dir, MaxSize: int64(10 * line), MaxFiles: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := f.Write(context.Background(), []Record{rec(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	files, _ := Files(dir)
	if len(files) != 3 {
		t.Fatalf("%d files: %v; want 3", len(files), files)
	}
	got := readRecords(t, dir)
	if len(got) < 19 || len(got) > 33 {
		t.Fatalf("%d records kept; want 19 to 33 (3 files of about 10)", len(got))
	}
	first := 100 - len(got)
	for i, r := range got {
		if r.Operation != rec(first+i).Operation {
			t.Fatalf("record %d: %q; want %q", i, r.Operation, rec(first+i).Operation)
		}
	}
}

// TestFileDirRemoved: a directory removed under the sink is made again at the next file.
func TestFileDirRemoved(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "audit")
	r0 := rec(0)
	f, err := NewFile(FileConfig{Dir: dir, MaxSize: int64(len(r0.AppendJSON(nil)) + 1)})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Write(context.Background(), []Record{rec(0)}); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := f.Write(context.Background(), []Record{rec(1)}); err != nil { // rotates: a new file
		t.Fatalf("Write after the directory was removed: %v", err)
	}
	f.Close(context.Background())
	if got := readRecords(t, dir); len(got) != 1 || got[0].Operation != rec(1).Operation {
		t.Errorf("records %+v; want the one written after", got)
	}
}

// countingSink counts its calls; failing makes Write fail.
type countingSink struct {
	writes, syncs, records atomic.Int64
	failing                atomic.Bool
}

func (c *countingSink) Name() string { return "counting" }
func (c *countingSink) Write(_ context.Context, recs []Record) error {
	if c.failing.Load() {
		return fmt.Errorf("sink down")
	}
	c.writes.Add(1)
	c.records.Add(int64(len(recs)))
	return nil
}
func (c *countingSink) Sync(context.Context) error  { c.syncs.Add(1); return nil }
func (c *countingSink) Close(context.Context) error { return nil }

// TestSyncEveryInterval: with records coming all the time, the sink is synced with the
// interval, never per record nor per batch.
func TestSyncEveryInterval(t *testing.T) {
	c := &countingSink{}
	l := Open(Config{Sync: 20 * time.Millisecond, Sinks: []Sink{c}})
	defer l.Close(context.Background())
	for c.syncs.Load() < 3 {
		l.Add(rec(0))
		time.Sleep(time.Millisecond)
	}
	// Each sync follows a write, so syncs <= writes; records come every millisecond and
	// gather for flushDelay: far fewer writes than records, and syncs fewer still.
	if s, w, r := c.syncs.Load(), c.writes.Load(), c.records.Load(); s > w || w >= r {
		t.Errorf("%d syncs, %d writes, %d records; want syncs <= writes < records", s, w, r)
	}
}

// TestFailingSinkReportedAndRetried: a sink that fails is in Err and the status, its batch
// is retried, and once it works nothing was lost or written twice.
func TestFailingSinkReportedAndRetried(t *testing.T) {
	c := &countingSink{}
	c.failing.Store(true)
	l := Open(Config{Retry: 5 * time.Millisecond, Sinks: []Sink{c}})
	for i := range 10 {
		l.Add(rec(i))
	}
	waitFor(t, func() bool { return l.Err() != nil })
	if st := l.Status(); st.Sinks[0].State != "failing" || !strings.Contains(st.Error, "sink down") ||
		st.Sinks[0].FailingSince == nil {
		t.Errorf("status while failing: %+v", st)
	}
	if !strings.Contains(l.Err().Error(), "counting") || !strings.Contains(l.Err().Error(), "sink down") {
		t.Errorf("Err = %v; want the sink's name and why", l.Err())
	}
	c.failing.Store(false)
	waitFor(t, func() bool { return l.Err() == nil && c.records.Load() == 10 })
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := c.records.Load(); n != 10 || l.Dropped() != 0 {
		t.Errorf("%d records written, %d dropped; want 10 and 0", n, l.Dropped())
	}
}

// TestCloseAbandonsAFailingSink: Close gives up on a sink still failing when its context
// ends, and counts what it held as dropped.
func TestCloseAbandonsAFailingSink(t *testing.T) {
	c := &countingSink{}
	c.failing.Store(true)
	l := Open(Config{Retry: time.Millisecond, Sinks: []Sink{c}})
	for i := range 5 {
		l.Add(rec(i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	l.Close(ctx)
	if d := l.Dropped(); d != 5 {
		t.Errorf("dropped %d; want the 5 records held", d)
	}
	l.Add(rec(9)) // after Close: dropped, counted, never blocks
	if d := l.Dropped(); d != 6 {
		t.Errorf("dropped %d after an Add past Close; want 6", d)
	}
}

func waitFor(tb testing.TB, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatal("condition not met within 10s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestIdleSinkWakesNothing: a sink's writer wakes for records and for the one sync that
// follows them, never on a clock while there is nothing to sync: an hour of synctest's clock
// with no record wakes it 0 times (3,600 with a ticker of the default 1 s sync, broken on
// purpose), and a record wakes it twice, to write it and to sync it.
func TestIdleSinkWakesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &countingSink{}
		l := Open(Config{Sinks: []Sink{c}})
		q := l.sinks[0]
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := q.wakeups.Load(); n != 0 {
			t.Fatalf("an idle hour woke the writer %d times; want 0", n)
		}
		l.Add(rec(1))
		time.Sleep(time.Hour)
		synctest.Wait()
		if n, w, s := q.wakeups.Load(), c.writes.Load(), c.syncs.Load(); n != 2 || w != 1 || s != 1 {
			t.Fatalf("a record and an hour: %d wake-ups, %d writes, %d syncs; want 2, 1 and 1", n, w, s)
		}
		if err := l.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}
