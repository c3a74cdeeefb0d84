package logs

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// syncBuffer is a bytes.Buffer safe for the concurrent test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func mustNew(tb testing.TB, cfg Config) *Registry {
	tb.Helper()
	r, err := New(cfg)
	if err != nil {
		tb.Fatalf("New(%+v): %v", cfg, err)
	}
	tb.Cleanup(func() { r.Close() })
	return r
}

// lines decodes JSON log lines.
func lines(tb testing.TB, s string) []map[string]any {
	tb.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			tb.Fatalf("line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func TestNames(t *testing.T) {
	r := mustNew(t, Config{Writer: io.Discard})
	if got, want := r.Names(), DefaultNames; !slices.Equal(got, want) {
		t.Fatalf("Names() = %v; want %v", got, want)
	}
	for _, n := range DefaultNames {
		got, err := r.Level(n)
		if err != nil || got != "info" {
			t.Errorf("Level(%q) = %q, %v; want info, nil", n, got, err)
		}
	}
}

func TestSetLevel(t *testing.T) {
	tests := []struct {
		name, logger, level string
		wantErr             error
		want                string // level of logger afterwards
	}{
		{"debug", "sidecar", "debug", nil, "debug"},
		{"trace", "node", "trace", nil, "trace"},
		{"upper case", "admin", "WARN", nil, "warn"},
		{"error", "tracing", "error", nil, "error"},
		{"loud", "sidecar", "loud", ErrBadLevel, "info"},
		{"warning is not warn", "sidecar", "warning", ErrBadLevel, "info"},
		{"empty level", "sidecar", "", ErrBadLevel, "info"},
		{"unknown logger", "nope", "debug", ErrUnknownLogger, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustNew(t, Config{Writer: io.Discard})
			err := r.SetLevel(tt.logger, tt.level)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("SetLevel(%q, %q) = %v; want %v", tt.logger, tt.level, err, tt.wantErr)
			}
			if tt.want == "" {
				return
			}
			if got, _ := r.Level(tt.logger); got != tt.want {
				t.Errorf("Level(%q) = %q; want %q", tt.logger, got, tt.want)
			}
			for _, n := range r.Names() {
				if n == tt.logger {
					continue
				}
				if got, _ := r.Level(n); got != "info" {
					t.Errorf("other logger %q = %q; want info", n, got)
				}
			}
		})
	}
}

func TestSetAll(t *testing.T) {
	r := mustNew(t, Config{Writer: io.Discard})
	if err := r.SetAll("loud"); !errors.Is(err, ErrBadLevel) {
		t.Fatalf("SetAll(loud) = %v; want ErrBadLevel", err)
	}
	if err := r.SetAll("debug"); err != nil {
		t.Fatal(err)
	}
	for _, n := range r.Names() {
		if got, _ := r.Level(n); got != "debug" {
			t.Errorf("Level(%q) = %q; want debug", n, got)
		}
	}
	r.Logger("later")
	if got, _ := r.Level("later"); got != "debug" {
		t.Errorf("new logger level = %q; want debug (the SetAll level)", got)
	}
}

func TestDynamicLevel(t *testing.T) {
	var buf bytes.Buffer
	r := mustNew(t, Config{Format: "json", Writer: &buf})
	l := r.Logger(Sidecar)
	if l != r.Logger(Sidecar) {
		t.Fatal("Logger returned different pointers for one name")
	}
	child := l.With().Str("conn", "c1").Logger()

	l.Debug().Msg("dropped")
	child.Debug().Msg("dropped too")
	l.Info().Msg("one")
	if err := r.SetLevel(Sidecar, "debug"); err != nil {
		t.Fatal(err)
	}
	l.Debug().Msg("two")
	child.Debug().Msg("three")
	r.Logger(Tracing).Debug().Msg("other logger stays at info")
	if err := r.SetLevel(Sidecar, "error"); err != nil {
		t.Fatal(err)
	}
	l.Warn().Msg("dropped")
	l.Error().Msg("four")

	got := lines(t, buf.String())
	want := []struct{ msg, level string }{{"one", "info"}, {"two", "debug"}, {"three", "debug"}, {"four", "error"}}
	if len(got) != len(want) {
		t.Fatalf("got %d lines %v; want %d", len(got), got, len(want))
	}
	for i, w := range want {
		if got[i]["message"] != w.msg || got[i]["level"] != w.level || got[i]["logger"] != Sidecar {
			t.Errorf("line %d = %v; want message %q level %q logger sidecar", i, got[i], w.msg, w.level)
		}
		if _, ok := got[i]["time"]; !ok {
			t.Errorf("line %d has no time: %v", i, got[i])
		}
	}
	if got[2]["conn"] != "c1" {
		t.Errorf("derived logger lost its field: %v", got[2])
	}
}

func TestConsoleFormat(t *testing.T) {
	var buf bytes.Buffer
	r := mustNew(t, Config{Writer: &buf})
	r.Logger(Admin).Info().Str("k", "v").Msg("hello")
	got := buf.String()
	for _, want := range []string{"INF", "hello", "logger=admin", "k=v"} {
		if !strings.Contains(got, want) {
			t.Errorf("console line %q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "\x1b[") {
		t.Errorf("console line to a non-terminal writer has colours: %q", got)
	}
}

func TestFileAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tracecar.log")
	if err := os.WriteFile(path, []byte("{\"message\":\"before\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := mustNew(t, Config{Format: "json", File: path, Level: "debug"})
	r.Logger(Node).Debug().Msg("after")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := lines(t, string(b))
	if len(got) != 2 || got[0]["message"] != "before" || got[1]["message"] != "after" {
		t.Errorf("file lines = %v; want before then after", got)
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"bad format", Config{Format: "xml", Writer: io.Discard}},
		{"bad level", Config{Level: "loud", Writer: io.Discard}},
		{"file in missing dir", Config{File: filepath.Join(t.TempDir(), "no", "such", "f.log")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r, err := New(tt.cfg); err == nil {
				r.Close()
				t.Fatalf("New(%+v) succeeded; want an error", tt.cfg)
			}
		})
	}
}

func TestNilRegistry(t *testing.T) {
	var r *Registry
	r.Logger(Sidecar).Error().Msg("goes nowhere")
	if got := r.Names(); got != nil {
		t.Errorf("Names() = %v; want nil", got)
	}
	if _, err := r.Level(Sidecar); !errors.Is(err, ErrUnknownLogger) {
		t.Errorf("Level on nil = %v; want ErrUnknownLogger", err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("Close on nil = %v", err)
	}
}

// TestConcurrent changes levels while loggers write; run it with -race.
func TestConcurrent(t *testing.T) {
	var buf syncBuffer
	r := mustNew(t, Config{Format: "json", Writer: &buf})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			l := r.Logger(DefaultNames[i%len(DefaultNames)])
			for j := range 200 {
				l.Debug().Int("j", j).Msg("x")
				l.Info().Int("j", j).Msg("y")
				if j%50 == 0 {
					r.SetLevel(DefaultNames[j%len(DefaultNames)], Levels[j%len(Levels)])
					r.SetAll("info")
					r.Names()
				}
			}
		})
	}
	wg.Wait()
	lines(t, buf.String()) // every line is whole JSON
}

// BenchmarkDisabledDebug is the cost of a debug line on a logger at info: the price a hot
// path pays for logging it does not do.
func BenchmarkDisabledDebug(b *testing.B) {
	r := mustNew(b, Config{Format: "json", Writer: io.Discard})
	l := r.Logger(Sidecar)
	b.ReportAllocs()
	for b.Loop() {
		l.Debug().Str("client", "127.0.0.1:50123").Int("stream", 7).Msg("request")
	}
}

// BenchmarkEnabledDebugJSON is the cost of the same line when debug is on, in JSON.
func BenchmarkEnabledDebugJSON(b *testing.B) {
	r := mustNew(b, Config{Format: "json", Writer: io.Discard, Level: "debug"})
	l := r.Logger(Sidecar)
	b.ReportAllocs()
	for b.Loop() {
		l.Debug().Str("client", "127.0.0.1:50123").Int("stream", 7).Msg("request")
	}
}

// BenchmarkEnabledDebugConsole is the cost of the same line in the console format.
func BenchmarkEnabledDebugConsole(b *testing.B) {
	r := mustNew(b, Config{Writer: io.Discard, Level: "debug"})
	l := r.Logger(Sidecar)
	b.ReportAllocs()
	for b.Loop() {
		l.Debug().Str("client", "127.0.0.1:50123").Int("stream", 7).Msg("request")
	}
}

// BenchmarkDisabledCheck is the level check alone: l.Debug() on a logger at info.
func BenchmarkDisabledCheck(b *testing.B) {
	r := mustNew(b, Config{Format: "json", Writer: io.Discard})
	l := r.Logger(Sidecar)
	b.ReportAllocs()
	for b.Loop() {
		l.Debug().Msg("request")
	}
}

func TestGate(t *testing.T) {
	r := mustNew(t, Config{Writer: io.Discard})
	g := r.Gate(Sidecar)
	if g.Enabled(zerolog.DebugLevel) || !g.Enabled(zerolog.InfoLevel) {
		t.Fatal("gate at info: debug enabled or info disabled")
	}
	if err := r.SetLevel(Sidecar, "trace"); err != nil {
		t.Fatal(err)
	}
	if !g.Enabled(zerolog.TraceLevel) {
		t.Error("gate did not follow SetLevel")
	}
	var zero Gate
	var nilReg *Registry
	if zero.Enabled(zerolog.ErrorLevel) || nilReg.Gate(Sidecar).Enabled(zerolog.ErrorLevel) {
		t.Error("zero gate enables something")
	}
}

// BenchmarkGatedDisabledDebug is BenchmarkDisabledDebug behind a Gate.
func BenchmarkGatedDisabledDebug(b *testing.B) {
	r := mustNew(b, Config{Format: "json", Writer: io.Discard})
	l, g := r.Logger(Sidecar), r.Gate(Sidecar)
	b.ReportAllocs()
	for b.Loop() {
		if g.Enabled(zerolog.DebugLevel) {
			l.Debug().Str("client", "127.0.0.1:50123").Int("stream", 7).Msg("request")
		}
	}
}

// BenchmarkStaticLevel is BenchmarkDisabledDebug on a plain zerolog logger whose level is
// fixed, for comparison: the price of changing levels at runtime is the difference.
func BenchmarkStaticLevel(b *testing.B) {
	l := zerolog.New(io.Discard).Level(zerolog.InfoLevel)
	b.ReportAllocs()
	for b.Loop() {
		l.Debug().Str("client", "127.0.0.1:50123").Int("stream", 7).Msg("request")
	}
}

func TestReopen(t *testing.T) {
	dir := t.TempDir()
	first, second := filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log")
	r, err := New(Config{File: first, Format: "console"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	log := r.Logger(Sidecar)
	r.SetLevel(Sidecar, "debug")
	log.Info().Msg("before")
	if err := r.Reopen(Config{File: second, Format: "json", Level: "error"}); err != nil {
		t.Fatal(err)
	}
	log.Debug().Msg("after")
	if err := r.Reopen(Config{Format: "yaml"}); err == nil {
		t.Error("Reopen with format yaml succeeded; want an error")
	}
	log.Info().Msg("still")
	a, _ := os.ReadFile(first)
	b, _ := os.ReadFile(second)
	if !strings.Contains(string(a), "before") || strings.Contains(string(a), "after") {
		t.Errorf("first file %q; want the line before Reopen only", a)
	}
	if !strings.Contains(string(b), `"message":"after"`) || !strings.Contains(string(b), `"message":"still"`) {
		t.Errorf("second file %q; want the lines after Reopen, in JSON, at the level set before", b)
	}
}

// TestTimestampsInMicroseconds: console and JSON lines give their time to the microsecond,
// not the second (issue 47, finding 6: `15:12:03.000Z`).
func TestTimestampsInMicroseconds(t *testing.T) {
	re := regexp.MustCompile(`\d{2}:\d{2}:\d{2}\.(\d+)`)
	for _, format := range []string{"console", "json"} {
		var buf bytes.Buffer
		r, err := New(Config{Format: format, Writer: &buf})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			r.Logger("sidecar").Info().Msg("hello")
			time.Sleep(time.Millisecond)
		}
		r.Close()
		// A time cut to the second shows no fraction, or (console) a fraction of zeros; three
		// lines a millisecond apart cannot all fall on a whole second.
		precise := false
		for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			m := re.FindStringSubmatch(line)
			if m == nil || len(m[1]) != 6 {
				t.Errorf("%s: line %q; want a time with 6 fractional digits", format, line)
				continue
			}
			precise = precise || m[1] != "000000"
			if format == "json" {
				var v struct{ Time string }
				if err := json.Unmarshal([]byte(line), &v); err != nil {
					t.Fatal(err)
				}
				if _, err := time.Parse(time.RFC3339Nano, v.Time); err != nil {
					t.Errorf("json time %q: %v", v.Time, err)
				}
			}
		}
		if !precise {
			t.Errorf("%s: every time is a whole second:\n%s", format, buf.String())
		}
	}
}
