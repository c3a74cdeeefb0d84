package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// profileDir holds the test profiles, next to the loadcheck package's own tests.
const profileDir = "../../loadcheck/testdata/profiles"

// profileReport is the part of loadcheck's JSON that the profile tests read.
type profileReport struct {
	Settings struct {
		Workload string `json:"workload"`
	} `json:"settings"`
	Modes []struct {
		Name       string     `json:"name"`
		OpsTotal   int64      `json:"ops_total"`
		Partitions int64      `json:"partitions"`
		Ops        []opFigure `json:"ops"`
	} `json:"modes"`
	Guardrail []struct {
		Mode     string `json:"mode"`
		Breached bool   `json:"breached"`
	} `json:"guardrail"`
}

type opFigure struct {
	Name       string  `json:"name"`
	Count      int64   `json:"count"`
	OpRate     float64 `json:"op_rate"`
	Rows       int64   `json:"rows"`
	Partitions int64   `json:"partitions"`
	Errors     int64   `json:"errors"`
	P50Ms      float64 `json:"p50_ms"`
	P99Ms      float64 `json:"p99_ms"`
}

func mustProfileReport(tb testing.TB, path string) profileReport {
	tb.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var r profileReport
	if err := json.Unmarshal(raw, &r); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	return r
}

// byName indexes a mode's operations.
func byName(ops []opFigure) map[string]opFigure {
	m := map[string]opFigure{}
	for _, o := range ops {
		m[o.Name] = o
	}
	return m
}

// TestLoadcheckProfileSeeds runs the shapes of the two seed runs, CASSANDRA-14318's (three
// reads of wide partitions that page, 1:1:4) and CASSANDRA-20132's (10-row partitions
// read whole), in modes off, fast, full, debug and node-debug with budgets: the mix holds
// within 2%, and every read returns the rows the profile implies.
func TestLoadcheckProfileSeeds(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the embedded default")
	}
	tests := []struct {
		name, file, ops string
		weights         map[string]float64
		check           func(t *testing.T, ops map[string]opFigure)
	}{
		{"CASSANDRA-14318", "events.yaml", "ops(read_event_1=1,read_event_2=1,read_event_3=4)",
			map[string]float64{"read_event_1": 1, "read_event_2": 1, "read_event_3": 4},
			func(t *testing.T, ops map[string]opFigure) {
				// 250 rows a partition, over pages of 100: the whole partition, the rows
				// from a row on (DESC), the first 10.
				if o := ops["read_event_1"]; o.Rows != 250*o.Count {
					t.Errorf("read_event_1: %d rows in %d reads; want 250 each (3 pages)", o.Rows, o.Count)
				}
				if o := ops["read_event_2"]; o.Rows < o.Count || o.Rows > 250*o.Count {
					t.Errorf("read_event_2: %d rows in %d reads; want 1 to 250 each", o.Rows, o.Count)
				}
				if o := ops["read_event_3"]; o.Rows != 10*o.Count {
					t.Errorf("read_event_3: %d rows in %d reads; want 10 each", o.Rows, o.Count)
				}
			}},
		{"CASSANDRA-20132", "partition_select.yaml", "partition-select=1",
			map[string]float64{"partition-select": 1},
			func(t *testing.T, ops map[string]opFigure) {
				if o := ops["partition-select"]; o.Rows != 10*o.Count {
					t.Errorf("partition-select: %d rows in %d reads; want 10 each", o.Rows, o.Count)
				}
			}},
	}
	modes := []string{"off", "fast", "full", "debug", "node-debug"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rj := filepath.Join(t.TempDir(), "r.json")
			out := mustRun(t, exitOK, "loadcheck", "--profile", filepath.Join(profileDir, tt.file), "--ops", tt.ops,
				"--pop", "seq=1..20", "--page-size", "100", "--modes", strings.Join(modes, ","), "--rounds", "1",
				"--duration", "600ms", "--warmup", "0", "--target-error", "0", "--concurrency", "6",
				"--max-overhead", "full=1000%,debug=1000%,node-debug=cpu:+1000us", "--json", rj)
			if !strings.Contains(out, "Preloaded 20 partitions") {
				t.Errorf("no preload line:\n%s", out)
			}
			first := strings.TrimPrefix(strings.SplitN(tt.ops, "=", 2)[0], "ops(") // the bracket lists the mix in order
			if !strings.Contains(out, "Op rate                   : ") || !strings.Contains(out, " op/s ["+first+": ") {
				t.Errorf("the Results block lacks the per-operation op rates:\n%s", out)
			}
			rep := mustProfileReport(t, rj)
			if rep.Settings.Workload != "profile" || len(rep.Modes) != len(modes) {
				t.Fatalf("workload %q, %d modes; want profile, %d", rep.Settings.Workload, len(rep.Modes), len(modes))
			}
			if len(rep.Guardrail) != 3 {
				t.Errorf("guardrail %+v; want 3 budgets judged", rep.Guardrail)
			}
			total := 0.0
			for _, w := range tt.weights {
				total += w
			}
			for _, m := range rep.Modes {
				ops := byName(m.Ops)
				if len(ops) != len(tt.weights) || m.OpsTotal == 0 {
					t.Fatalf("mode %s: ops %+v; want %d operations", m.Name, m.Ops, len(tt.weights))
				}
				for name, w := range tt.weights {
					o := ops[name]
					share := float64(o.Count) / float64(m.OpsTotal)
					if want := w / total; math.Abs(share-want) > 0.02*want {
						t.Errorf("mode %s: %s is %.4f of the operations; want %.4f within 2%%", m.Name, name, share, want)
					}
					if o.Errors != 0 || o.Partitions != o.Count || o.P50Ms <= 0 || o.P99Ms < o.P50Ms || o.OpRate <= 0 {
						t.Errorf("mode %s: %s = %+v; want no errors, a partition found by every read, latencies", m.Name, name, o)
					}
				}
				tt.check(t, ops)
			}
		})
	}
}

// TestLoadcheckProfiles runs the further profiles against the embedded node: counters,
// an LWT condition, LOGGED and UNLOGGED batches over several partitions, clustering DESC,
// collections and every type, every distribution with ~ and the suffixes, and queries
// with a consistency of their own.
func TestLoadcheckProfiles(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the embedded default")
	}
	tests := []struct {
		file, ops string
		// rows and parts are the rows and partitions each operation implies (0: any > 0).
		rows, parts map[string]int64
	}{
		{"counters.yaml", "insert=1,read=1", map[string]int64{"insert": 6, "read": 1}, map[string]int64{"insert": 2, "read": 1}},
		{"lwt.yaml", "insert=1,read=2", map[string]int64{"insert": 1, "read": 1}, map[string]int64{"insert": 1, "read": 1}},
		{"batch_logged.yaml", "insert=1,bucket=1", map[string]int64{"insert": 12, "bucket": 4}, map[string]int64{"insert": 3, "bucket": 1}},
		{"batch_unlogged.yaml", "ops(insert=1,bucket=1)", map[string]int64{"insert": 12, "bucket": 4}, map[string]int64{"insert": 3, "bucket": 1}},
		{"clustering_desc.yaml", "insert=1,whole=1,one=1", map[string]int64{"insert": 15, "whole": 15, "one": 1}, map[string]int64{"insert": 1, "whole": 1, "one": 1}},
		{"collections.yaml", "insert=1,row=1", map[string]int64{"insert": 2, "row": 1}, map[string]int64{"insert": 1, "row": 1}},
		{"distributions.yaml", "insert=1,whole=1,row=1", map[string]int64{"insert": 0, "whole": 0, "row": 1}, map[string]int64{"insert": 0, "whole": 1, "row": 1}},
	}
	for _, tt := range tests {
		t.Run(strings.TrimSuffix(tt.file, ".yaml"), func(t *testing.T) {
			rj := filepath.Join(t.TempDir(), "r.json")
			out := mustRun(t, exitOK, "loadcheck", "--profile", filepath.Join(profileDir, tt.file), "--ops", tt.ops,
				"--pop", "seq=1..30", "--modes", "off", "--rounds", "1", "--duration", "400ms", "--warmup", "0",
				"--target-error", "0", "--concurrency", "4", "--json", rj)
			rep := mustProfileReport(t, rj)
			ops := byName(rep.Modes[0].Ops)
			for name, want := range tt.rows {
				o := ops[name]
				if o.Count == 0 || o.Errors != 0 {
					t.Fatalf("%s: %+v; want operations without errors\n%s", name, o, out)
				}
				if want > 0 && o.Rows != want*o.Count || want == 0 && o.Rows < o.Count {
					t.Errorf("%s: %d rows in %d operations; want %d each", name, o.Rows, o.Count, want)
				}
				if wp := tt.parts[name]; wp > 0 && o.Partitions != wp*o.Count || wp == 0 && o.Partitions < o.Count {
					t.Errorf("%s: %d partitions in %d operations; want %d each", name, o.Partitions, o.Count, wp)
				}
			}
		})
	}
}

// TestLoadcheckProfileErrors: bad input is refused with exit 2, naming the key and the
// line, or passing the node's own message on.
func TestLoadcheckProfileErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	head := "keyspace: bad_ks\nkeyspace_definition: |\n  CREATE KEYSPACE bad_ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}\ntable: t\n"
	unknown := write("unknown.yaml", head+"table_definiton: CREATE TABLE t (k int PRIMARY KEY)\n")
	dist := write("dist.yaml", head+"columnspec:\n  - name: k\n    population: uniform(1..x)\n")
	refused := write("refused.yaml", head+"table_definition: CREATE TABLE t (k int, v int)\nqueries:\n  q:\n    cql: SELECT * FROM t WHERE k = ?\n")
	unbound := write("unbound.yaml", head+"table_definition: CREATE TABLE t (k int PRIMARY KEY, v int)\nqueries:\n  q:\n    cql: SELECT * FROM t WHERE k = ? LIMIT ?\n")
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"unknown key", []string{"--profile", unknown}, []string{unknown + ":5:", `unknown key "table_definiton"`}},
		{"malformed distribution", []string{"--profile", dist}, []string{dist + ":7:", "uniform(1..x)"}},
		{"unknown --ops name", []string{"--profile", filepath.Join(profileDir, "partition_select.yaml"), "--ops", "insert=1,partition_select=1"},
			[]string{`"partition_select" is not an operation`, "insert, partition-select"}},
		{"table the node refuses", []string{"--profile", refused, "--ops", "insert=1"}, []string{refused, "table_definition (line 5)", "the node refused it", "PRIMARY KEY"}},
		{"unbindable ?", []string{"--profile", unbound, "--ops", "q=1"}, []string{unbound + ":7:", "query q", "cannot be bound from columnspec"}},
		{"--ops without a profile", []string{"--ops", "insert=1"}, []string{"needs --profile"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"loadcheck", "--modes", "off", "--rounds", "1", "--duration", "200ms", "--warmup", "0", "--target-error", "0"}, tt.args...)
			out := mustRun(t, exitUsage, args...)
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestLoadcheckProtocolV5 runs the built-in write workload and a profile at protocol v5
// through the sidecar, the write workload against a mode that differs by its protocol
// alone (protocol-version=4), and the profile also at v3 through gocql. It logs the
// sidecar's CPU per op at v5 against v4 in the same run; the bar itself is a measurement
// (loadcheck.md), not a timed assertion.
func TestLoadcheckProtocolV5(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the embedded default")
	}
	dir := t.TempDir()
	rj := filepath.Join(dir, "write.json")
	off := "POST /storage_service/slow_query?enable=false;POST /storage_service/trace_probability?probability=0"
	out := mustRun(t, exitOK, "loadcheck", "--protocol-version", "5", "--modes", "off,fast,off-v4",
		"--mode", "off-v4="+off+";protocol-version=4", "--rounds", "2", "--duration", "500ms", "--warmup", "100ms",
		"--target-error", "0", "--concurrency", "8", "--json", rj)
	if !strings.Contains(out, "protocol v5, through loadcheck's own CQL client") {
		t.Errorf("the output does not say which version ran:\n%s", out)
	}
	raw, err := os.ReadFile(rj)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Settings struct {
			Protocol int `json:"protocol_version"`
		} `json:"settings"`
		Modes []struct {
			Name       string   `json:"name"`
			Ops        int64    `json:"ops"`
			Errors     int64    `json:"errors"`
			SidecarCPU *float64 `json:"sidecar_cpu_us_per_op"`
			Diff       *float64 `json:"sidecar_cpu_us_per_op_diff"`
			DiffErr    *float64 `json:"sidecar_cpu_us_per_op_diff_stderr"`
		} `json:"modes"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Settings.Protocol != 5 || len(rep.Modes) != 3 {
		t.Fatalf("protocol %d, %d modes; want 5 and 3", rep.Settings.Protocol, len(rep.Modes))
	}
	for _, m := range rep.Modes {
		if m.Ops == 0 || m.Errors != 0 || m.SidecarCPU == nil {
			t.Errorf("mode %s: %d ops, %d errors, sidecar CPU %v; want ops, no error, the sidecar's CPU", m.Name, m.Ops, m.Errors, m.SidecarCPU)
		}
		if m.Name == "off-v4" && m.Diff != nil && m.DiffErr != nil {
			t.Logf("sidecar CPU per op at v4 %.3f µs, v5 − v4 = %+.3f ± %.3f µs (in the same run)", *m.SidecarCPU, -*m.Diff, *m.DiffErr)
		}
	}

	for _, version := range []string{"5", "3"} {
		pj := filepath.Join(dir, "profile-v"+version+".json")
		out := mustRun(t, exitOK, "loadcheck", "--protocol-version", version, "--profile", filepath.Join(profileDir, "partition_select.yaml"),
			"--ops", "insert=1,partition-select=4", "--pop", "seq=1..50", "--modes", "off", "--rounds", "1", "--duration", "400ms",
			"--warmup", "0", "--target-error", "0", "--concurrency", "4", "--json", pj)
		if !strings.Contains(out, "protocol v"+version) {
			t.Errorf("v%s: the output does not say which version ran", version)
		}
		ops := byName(mustProfileReport(t, pj).Modes[0].Ops)
		if o := ops["partition-select"]; o.Count == 0 || o.Errors != 0 || o.Rows != 10*o.Count {
			t.Errorf("v%s: partition-select %+v; want 10 rows a read, no error", version, o)
		}
		if o := ops["insert"]; o.Count == 0 || o.Errors != 0 || o.Rows != 10*o.Count {
			t.Errorf("v%s: insert %+v; want 10 rows an insert, no error", version, o)
		}
	}
}
