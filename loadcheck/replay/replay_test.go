package replay

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/testkit/capturetest"
)

// writeCapture writes a capture of 200 prepared reads of ks.t, one a millisecond over ten
// keys, each answered with one row in 100 µs.
func writeCapture(tb testing.TB) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "c.tcap")
	capturetest.Write(tb, path, capturetest.Columns)
	return path
}

// TestLoadOptions: each error in the Options wraps ErrUsage, which the load checker turns
// into its exit 2, and an error of the file does not; good options give the plan of the
// capture.
func TestLoadOptions(t *testing.T) {
	path := writeCapture(t)
	for _, tt := range []struct {
		name  string
		path  string
		o     Options
		usage bool
	}{
		{"an unreadable speed", path, Options{Speed: "fast"}, true},
		{"a speed and a rate", path, Options{Speed: "2x", Rate: 100}, true},
		{"no file", "", Options{}, true},
		{"a keyspace that is no name", path, Options{Keyspace: "a-b"}, true},
		{"a captured keyspace", path, Options{Keyspace: "KS"}, true},
		{"a missing file", filepath.Join(t.TempDir(), "none.tcap"), Options{}, false},
	} {
		_, err := Load(tt.path, tt.o)
		if err == nil || errors.Is(err, ErrUsage) != tt.usage {
			t.Errorf("%s: Load(%+v) = %v; want an error, usage %v", tt.name, tt.o, err, tt.usage)
		}
	}
	rp, err := Load(path, Options{Speed: "2x"})
	if err != nil {
		t.Fatal(err)
	}
	if rp.Path() != path || rp.Speed() != 2 || rp.Requests() != 200 || rp.Span() != 199*time.Millisecond || rp.Tables() != 1 {
		t.Errorf("path %s, speed %g, %d requests over %v, %d tables; want %s, 2, 200 over 199ms, 1", rp.Path(), rp.Speed(), rp.Requests(), rp.Span(), rp.Tables(), path)
	}
	if got := rp.Connections(0); got != 1 {
		t.Errorf("Connections(0) = %d; want the capture's 1", got)
	}
	if got := rp.Connections(5); got != 5 {
		t.Errorf("Connections(5) = %d; want 5", got)
	}
	if got, want := rp.SkipSummary(), "every captured request is replayed"; got != want {
		t.Errorf("SkipSummary() = %q; want %q", got, want)
	}
	if got := rp.PreloadRows(); got != 10 {
		t.Errorf("PreloadRows() = %d; want one row for each of the 10 keys read", got)
	}
}

// TestTimes: the intended starts are the recorded times over the speed, the requests in
// order at a fixed rate when there is none, cut at a warmup's limit, and nil (as fast as
// the workers go) for max.
func TestTimes(t *testing.T) {
	path := writeCapture(t)
	load := func(o Options) *Replay {
		rp, err := Load(path, o)
		if err != nil {
			t.Fatal(err)
		}
		return rp
	}
	check := func(name string, at []time.Duration, n int, step time.Duration) {
		t.Helper()
		if len(at) != n {
			t.Fatalf("%s: %d starts; want %d", name, len(at), n)
		}
		for i, a := range at {
			if want := time.Duration(i) * step; a != want {
				t.Fatalf("%s: start %d at %v; want %v", name, i, a, want)
			}
		}
	}
	check("2x", load(Options{Speed: "2x"}).Times(0, 0), 200, 500*time.Microsecond)
	check("2x, a 50ms warmup", load(Options{Speed: "2x"}).Times(0, 50*time.Millisecond), 100, 500*time.Microsecond)
	check("0.5x", load(Options{Speed: "0.5"}).Times(0, 0), 200, 2*time.Millisecond)
	check("100 op/s", load(Options{Rate: 100}).Times(100, 0), 200, 10*time.Millisecond)
	if at := load(Options{Speed: "max"}).Times(0, 0); at != nil {
		t.Errorf("max: %d starts; want none (as fast as the workers go)", len(at))
	}
}

// TestReport: before any run, the report holds the capture's side: its statement count,
// its ten keys at 10% each, its latency, and the speed as the report names it.
func TestReport(t *testing.T) {
	path := writeCapture(t)
	for _, tt := range []struct {
		o     Options
		speed string
	}{
		{Options{}, "1x"},
		{Options{Speed: "max"}, "max"},
		{Options{Rate: 100}, "rate 100 op/s"},
	} {
		rp, err := Load(path, tt.o)
		if err != nil {
			t.Fatal(err)
		}
		rep := rp.Report(tt.o.Rate, 3, nil)
		if rep.Speed != tt.speed || rep.Connections != 3 || rep.Records != 200 || rep.Replayed != 200 {
			t.Errorf("%+v: speed %q, %d connections, %d records, %d replayed; want %q, 3, 200, 200", tt.o, rep.Speed, rep.Connections, rep.Records, rep.Replayed, tt.speed)
		}
		if len(rep.Statements) != 1 || rep.Statements[0].Captured != 200 || rep.Statements[0].Replayed != 0 {
			t.Errorf("%+v: statements %+v; want one, captured 200 times", tt.o, rep.Statements)
		}
		if rep.Keys.Distinct != 10 || len(rep.Keys.Top) != 10 || rep.Keys.Top[0].CapturedPct != 10 {
			t.Errorf("%+v: keys %+v; want 10, each 10%% of the capture", tt.o, rep.Keys)
		}
		if rep.CapturedLatency.P50Ms != 0.1 || rep.CapturedLatency.MaxMs != 0.1 {
			t.Errorf("%+v: captured latency %+v; want 0.1 ms", tt.o, rep.CapturedLatency)
		}
	}
}
