package sidecar

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/tracecar/tracecar/internal/capturefile"
	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/capture"
)

// newCapturePathConn is newPathConn with a workload capture, off, writing to a temporary
// directory.
func newCapturePathConn(tb testing.TB) (*pathConn, *capture.Capture) {
	tb.Helper()
	pc := newPathConn(tb, tracing.DefaultConfig())
	dir := filepath.Join(tb.TempDir(), "captures")
	cp := capture.New(capture.Config{Dir: dir, Statements: pc.c.p.sh.Prepared})
	if err := capture.CheckDir(dir); err != nil {
		tb.Fatal(err)
	}
	pc.c.p.sh.Capture = cp
	tb.Cleanup(func() { cp.Close(context.Background()) })
	return pc, cp
}

// TestCaptureOffAllocs asserts that a sidecar with a workload capture that is off pays no
// allocation per request (one atomic load), and that one that is on captures every
// request of the path and its response.
func TestCaptureOffAllocs(t *testing.T) {
	pc, cp := newCapturePathConn(t)
	for range 2048 {
		pc.one()
	}
	if n := testing.AllocsPerRun(1000, func() { pc.one() }); n != 0 {
		t.Errorf("capture off: %v allocations per request; want 0", n)
	}
	if _, err := cp.Start(capture.Options{}); err != nil {
		t.Fatal(err)
	}
	for range 500 {
		pc.one()
	}
	st, err := cp.Stop(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Last == nil || st.Last.Records != 500 {
		t.Fatalf("capture on: last %+v; want 500 records", st.Last)
	}
	c, err := capturefile.ReadFile(st.Last.File)
	if err != nil {
		t.Fatal(err)
	}
	r := c.Records[0]
	if r.Opcode != byte(cql.OpQuery) || r.RespOpcode != capturefile.OpResult || r.ResultKind != capturefile.ResultVoid || len(r.Parts) != 1 ||
		c.Statements[r.Parts[0].Statement].Text != "INSERT INTO ks.t (k, v) VALUES (?, ?)" {
		t.Errorf("record %+v, statement %+v", r, c.Statements[r.Parts[0].Statement])
	}
}

// BenchmarkRequestPathCapture is BenchmarkRequestPath with tracing off and the workload
// capture off, then on: the difference is what the capture costs the data path per
// request (its writer's work, on another goroutine, is not in it: loadcheck measures the
// whole process).
func BenchmarkRequestPathCapture(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			pc, cp := newCapturePathConn(b)
			if on {
				if _, err := cp.Start(capture.Options{MaxBytes: 1 << 40, Duration: capture.MaxDuration}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				pc.one()
			}
			b.StopTimer()
			if st, _ := cp.Stop(context.Background()); on && st.Last != nil {
				b.ReportMetric(float64(st.Last.Dropped)/float64(b.N), "dropped/op")
			}
		})
	}
}
