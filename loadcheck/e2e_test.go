package loadcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/node"
)

// mustNode starts an embedded node on a loopback port and returns its address.
func mustNode(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv := node.New(node.Config{})
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	tb.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			tb.Error("node did not stop")
		}
	})
	return ln.Addr().String()
}

func TestRunDirectEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	tests := []struct {
		name        string
		workload    string
		compression string
		rate        float64
	}{
		{"write", "write", "none", 0},
		{"read lz4", "read", "lz4", 0},
		{"mixed snappy fixed rate", "mixed", "snappy", 2000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := mustNode(t)
			dir := t.TempDir()
			var out bytes.Buffer
			cfg := Config{
				Node: addr, Modes: []string{"direct"}, Rounds: 1,
				Duration: 300 * time.Millisecond, Warmup: 100 * time.Millisecond, Interval: 100 * time.Millisecond,
				Workload: tt.workload, Compression: tt.compression, Rate: tt.rate, Pop: "uniform(1..2000)", Concurrency: 8,
				JSON: filepath.Join(dir, "r.json"), CSV: filepath.Join(dir, "r.csv"), HTML: filepath.Join(dir, "r.html"),
				HDRLogDir: filepath.Join(dir, "hdr"), Out: &out,
			}
			rep, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatalf("Run: %v\n%s", err, out.String())
			}
			m := rep.Mode("direct")
			if m == nil || m.Ops == 0 || m.OpRate <= 0 || m.P50Ms <= 0 || m.MaxMs < m.P99Ms || m.Errors != 0 {
				t.Fatalf("direct = %+v; want ops, op rate and latencies, no errors\n%s", m, out.String())
			}
			if tt.workload != "write" && m.Rows == 0 {
				t.Errorf("rows = 0; reads of a preloaded population should find rows")
			}
			raw, err := os.ReadFile(cfg.JSON)
			if err != nil {
				t.Fatal(err)
			}
			var doc struct {
				Modes []map[string]any `json:"modes"`
			}
			if err := json.Unmarshal(raw, &doc); err != nil {
				t.Fatal(err)
			}
			if len(doc.Modes) != 1 {
				t.Fatalf("json modes = %d; want 1", len(doc.Modes))
			}
			for _, k := range []string{"op_rate", "p50_ms", "p95_ms", "p99_ms", "p999_ms", "max_ms", "mean_ms", "cpu_us_per_op"} {
				if v, ok := doc.Modes[0][k].(float64); !ok || v <= 0 {
					t.Errorf("json modes[0].%s = %v; want a positive number", k, doc.Modes[0][k])
				}
			}
			for _, k := range []string{"name", "errors", "degradation_pct", "p_value", "rounds", "runs", "service", "op_rate_stdev", "op_rate_stderr", "degradation_err"} {
				if _, ok := doc.Modes[0][k]; !ok {
					t.Errorf("json modes[0] lacks %q", k)
				}
			}
			for _, want := range []string{"Results:", "Op rate", "total ops,", "Comparison"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output lacks %q", want)
				}
			}
			if _, err := os.Stat(filepath.Join(cfg.HDRLogDir, "direct-round1.hlog")); err != nil {
				t.Error(err)
			}
		})
	}
}
