package loadcheck

import (
	"bytes"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/node/storage"
)

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestPreloadProgress: the progress line says partitions, rows, bytes, the rate and the
// time left, and stops with the preload.
func TestPreloadProgress(t *testing.T) {
	var w syncBuffer
	pl := preloadPlan{partitions: 10, rows: 10000, rowsPer: 1000, partBytes: 1 << 20}
	var parts, rows atomic.Int64
	parts.Store(4)
	rows.Store(4000)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		preloadProgress(&w, time.Millisecond, pl, &parts, &rows, time.Now().Add(-time.Second), stop)
	}()
	for !strings.Contains(w.String(), "\n") {
		time.Sleep(time.Millisecond)
	}
	close(stop)
	<-done
	line := strings.SplitN(w.String(), "\n", 2)[0]
	re := regexp.MustCompile(`^preload: 4 of 10 partitions, 4,000 rows, about 4 MiB, [\d,]+ rows/s, about \S+ left$`)
	if !re.MatchString(line) {
		t.Errorf("progress line %q; want it to match %s", line, re)
	}
}

// TestPreloadProgressFirstEarly: with reports every hour, the first still comes after about
// a second, so that a preload of a few seconds shows its pace; then the next waits its turn.
func TestPreloadProgressFirstEarly(t *testing.T) {
	var w syncBuffer
	pl := preloadPlan{partitions: 10, rows: 10000, rowsPer: 1000, partBytes: 1 << 20}
	var parts, rows atomic.Int64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		preloadProgress(&w, time.Hour, pl, &parts, &rows, time.Now(), stop)
	}()
	deadline := time.Now().Add(30 * time.Second) // a bound on the wait, not a timing check
	for !strings.Contains(w.String(), "\n") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	close(stop)
	<-done
	if n := strings.Count(w.String(), "\n"); n != 1 {
		t.Errorf("%d progress lines with reports every hour; want the one early report:\n%s", n, w.String())
	}
}

// TestPreloadPlan: the default preload fits its byte budget, an eighth of the node's limit
// up to DefaultPreloadBytes; --preload forces a count; a plan over the limit is refused.
func TestPreloadPlan(t *testing.T) {
	mb := float64(1 << 20)
	tests := []struct {
		name           string
		preload, limit int64
		wantParts      int64
		wantErr        bool
	}{
		{"default, no limit known", 0, 0, 256, false},
		{"default, 64 MiB node", 0, 64 << 20, 8, false},
		{"default, 8 GiB node", 0, 8 << 30, 256, false},
		{"forced", 100, 64 << 20, 100, true},
		{"forced within", 30, 64 << 20, 30, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := preloadPlan{partBytes: mb, rowsPer: 10, limit: tt.limit}
			pl = sizePreload(pl, tt.preload, 1_000_000)
			if pl.partitions != tt.wantParts || pl.rows != 10*tt.wantParts {
				t.Errorf("plan %+v; want %d partitions of 10 rows", pl, tt.wantParts)
			}
			err := pl.check()
			if (err != nil) != tt.wantErr {
				t.Errorf("check: %v; want an error %v", err, tt.wantErr)
			}
			if err != nil && (!strings.Contains(err.Error(), "--memory-limit 64 MiB") || !strings.Contains(err.Error(), "--preload")) {
				t.Errorf("check: %v; want it to name the limit and --preload", err)
			}
		})
	}
}

// TestMemoryFullNote: runs whose writes the node's memory limit refused are named in a
// warning with their errors; runs with other errors, or none, give no warning.
func TestMemoryFullNote(t *testing.T) {
	full := "cql: overloaded (0x1001): node memory limit 64 MiB reached (--memory-limit): its tables hold 56 MiB"
	run := func(round int, errs int64, first string) *runResult {
		return &runResult{RunResult: RunResult{Round: round, Errors: errs, FirstError: first}}
	}
	c := &checker{modes: []*mode{{name: "off"}, {name: "fast"}}}
	c.runs = [][]*runResult{{run(1, 0, ""), run(2, 7, full)}, {run(1, 3, "timeout"), run(2, 1200, full)}}
	want := "warning: the node's memory limit refused writes (1,207 errors) in 2 runs (off round 2, fast round 2)"
	if got := c.memoryFullNote(); !strings.HasPrefix(got, want) {
		t.Errorf("memoryFullNote() = %q; want it to start with %q", got, want)
	}
	c.runs = [][]*runResult{{run(1, 0, "")}, {run(1, 3, "timeout")}}
	if got := c.memoryFullNote(); got != "" {
		t.Errorf("memoryFullNote() with no refusal = %q; want none", got)
	}
}

// TestPreloadChargesAreTheNodes: the preload plan sizes a partition with the node's own
// charges (internal/node/storage's estimate), so that its plan is what the limit counts.
func TestPreloadChargesAreTheNodes(t *testing.T) {
	got := storage.Charges{Partition: nodePartitionBytes, Row: nodeRowBytes, Cell: nodeCellBytes, KeyValue: nodeKeyValueBytes, Value: nodeValueBytes}
	if want := storage.EstimateCharges(); got != want {
		t.Errorf("the preload plan's charges are %+v; the node's estimate charges %+v", got, want)
	}
}
