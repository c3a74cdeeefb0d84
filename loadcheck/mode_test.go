package loadcheck

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseSpec(t *testing.T) {
	tests := []struct {
		spec    string
		want    []string // steps, as String renders them
		wantErr string
	}{
		{spec: "POST /storage_service/slow_query?enable=true&fast=true", want: []string{"POST /storage_service/slow_query?enable=true&fast=true"}},
		{spec: " node:POST /system/logger/node?level=debug ; target=127.0.0.1:9042 ", want: []string{"node:POST /system/logger/node?level=debug", "target=127.0.0.1:9042"}},
		{spec: "target=node", want: []string{"target=node"}},
		{spec: "target=sidecar;", want: []string{"target=sidecar"}},
		{spec: "target=[::1]:9042", want: []string{"target=[::1]:9042"}},
		{spec: "POST /a;POST /b?x=1", want: []string{"POST /a", "POST /b?x=1"}},
		{spec: "GET /storage_service/slow_query", wantErr: "want \"POST /path?query\""},
		{spec: "post /a", wantErr: "want \"POST /path?query\""},
		{spec: "POST a?b=c", wantErr: "want \"POST /path?query\""},
		{spec: "POST /a b", wantErr: "want \"POST /path?query\""},
		{spec: "POST /a?b=%zz", wantErr: "bad query"},
		{spec: "target=localhost", wantErr: "want target=HOST:PORT"},
		{spec: "target=a:1;target=b:2", wantErr: "more than one target"},
		{spec: " ; ", wantErr: "empty SPEC"},
		{spec: "trace-context=sampled;POST /a", want: []string{"trace-context=sampled", "POST /a"}},
		{spec: "trace-context=maybe", wantErr: "want trace-context=sampled"},
		{spec: "trace-context=none;trace-context=sampled", wantErr: "more than one trace-context"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			steps, err := parseSpec(tt.spec)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseSpec error = %v; want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseSpec: %v", err)
			}
			var got []string
			for _, s := range steps {
				got = append(got, s.String())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("steps = %q; want %q", got, tt.want)
			}
		})
	}
}

func TestBuiltinModesParse(t *testing.T) {
	for name, spec := range builtinModes {
		if _, err := parseSpec(spec); err != nil {
			t.Errorf("built-in mode %s: %v", name, err)
		}
	}
	for _, name := range builtinOrder {
		if _, ok := builtinModes[name]; !ok {
			t.Errorf("builtinOrder names %s, which is not built in", name)
		}
	}
}

func TestParseModeFlag(t *testing.T) {
	tests := []struct {
		in, name, spec, wantErr string
	}{
		{in: "slow=POST /storage_service/slow_query?enable=true&threshold=0", name: "slow", spec: "POST /storage_service/slow_query?enable=true&threshold=0"},
		{in: "haproxy=target=127.0.0.1:9044", name: "haproxy", spec: "target=127.0.0.1:9044"},
		{in: "=POST /a", wantErr: "want NAME=SPEC"},
		{in: "nospec", wantErr: "want NAME=SPEC"},
		{in: "a b=POST /a", wantErr: "mode name"},
		{in: "x=GET /a", wantErr: "--mode x"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			name, spec, err := parseModeFlag(tt.in)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error = %v; want a usage error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || name != tt.name || spec != tt.spec {
				t.Errorf("parseModeFlag = %q, %q, %v; want %q, %q", name, spec, err, tt.name, tt.spec)
			}
		})
	}
}

func TestResolveModes(t *testing.T) {
	full := Config{Node: "n:1", Sidecar: "s:2", Admin: "http://a", NodeAPI: "http://b"}
	tests := []struct {
		name         string
		cfg          Config
		want         []string // name@target
		wantBaseline string
	}{
		{"defaults", full, []string{"direct@n:1", "off@s:2", "fast@s:2", "full@s:2", "debug@s:2"}, "off"},
		{"defaults without node", Config{Sidecar: "s:2", Admin: "http://a"}, []string{"off@s:2", "fast@s:2", "full@s:2", "debug@s:2"}, "off"},
		{"node only", Config{Node: "n:1"}, []string{"direct@n:1"}, "direct"},
		{"baseline put first", with(full, func(c *Config) { c.Modes = []string{"fast"} }), []string{"off@s:2", "fast@s:2"}, "off"},
		{"off added as baseline", with(full, func(c *Config) { c.Modes = []string{"fast", "full"} }), []string{"off@s:2", "fast@s:2", "full@s:2"}, "off"},
		{"first is baseline without a sidecar", Config{Node: "n:1", NodeAPI: "http://b", Modes: []string{"direct", "nd"}, ModeSpecs: map[string]string{"nd": "target=node;node:POST /system/logger/node?level=debug"}},
			[]string{"direct@n:1", "nd@n:1"}, "direct"},
		{"explicit baseline", with(full, func(c *Config) { c.Modes = []string{"direct", "off"}; c.Baseline = "direct" }), []string{"direct@n:1", "off@s:2"}, "direct"},
		{"defined but not listed: not run", with(full, func(c *Config) {
			c.Modes = []string{"off"}
			c.ModeSpecs = map[string]string{"zz": "target=h:9", "aa": "POST /x"}
		}), []string{"off@s:2"}, "off"},
		{"defined and listed", with(full, func(c *Config) {
			c.Modes = []string{"off", "zz"}
			c.ModeSpecs = map[string]string{"zz": "target=h:9", "aa": "POST /x"}
		}), []string{"off@s:2", "zz@h:9"}, "off"},
		{"override built-in", with(full, func(c *Config) {
			c.Modes = []string{"off"}
			c.ModeSpecs = map[string]string{"off": "target=node"}
		}), []string{"off@n:1"}, "off"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			modes, baseline, err := resolveModes(&cfg)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range modes {
				got = append(got, m.name+"@"+m.target)
			}
			if !slices.Equal(got, tt.want) || baseline != tt.wantBaseline {
				t.Errorf("modes = %v, baseline %s; want %v, %s", got, baseline, tt.want, tt.wantBaseline)
			}
		})
	}
}

func with(c Config, f func(*Config)) Config {
	f(&c)
	return c
}

func TestRoundOrder(t *testing.T) {
	tests := []struct {
		n, r int
		want []int
	}{
		{3, 0, []int{0, 1, 2}},
		{3, 1, []int{2, 1, 0}},
		{3, 2, []int{1, 2, 0}},
		{3, 3, []int{0, 2, 1}},
		{3, 4, []int{2, 0, 1}},
		{2, 0, []int{0, 1}},
		{2, 1, []int{1, 0}},
		{2, 2, []int{1, 0}},
		{2, 3, []int{0, 1}},
		{1, 5, []int{0}},
	}
	for _, tt := range tests {
		if got := roundOrder(tt.n, tt.r); !slices.Equal(got, tt.want) {
			t.Errorf("roundOrder(%d, %d) = %v; want %v", tt.n, tt.r, got, tt.want)
		}
	}
}

func TestRoundOrderBalance(t *testing.T) {
	// Over 2n rounds, every mode runs exactly twice in every position.
	for n := 1; n <= 7; n++ {
		count := make([][]int, n)
		for i := range count {
			count[i] = make([]int, n)
		}
		for r := 0; r < 2*n; r++ {
			for pos, m := range roundOrder(n, r) {
				count[m][pos]++
			}
		}
		for m := range count {
			for pos, c := range count[m] {
				if c != 2 {
					t.Errorf("n=%d: mode %d ran %d times at position %d over %d rounds; want 2", n, m, c, pos, 2*n)
				}
			}
		}
	}
}

func TestSnapshotRestore(t *testing.T) {
	api, url := mustFakeAPI(t)
	before := api.state()
	c := newAPIClient(&Config{Admin: url + "/", NodeAPI: url})
	modes := []*mode{
		{name: "a", steps: mustSteps(t, "POST /storage_service/slow_query?enable=false&fast=true&threshold=1&ttl=2;POST /storage_service/trace_probability?probability=1")},
		{name: "b", steps: mustSteps(t, "POST /system/logger?level=trace;POST /tracecar/unknown?x=1")},
	}
	st, notes, err := c.snapshot(context.Background(), modes)
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "/tracecar/unknown") {
		t.Errorf("notes = %q; want one about the unknown path", notes)
	}
	for _, m := range modes {
		if err := c.apply(context.Background(), m); err != nil && !strings.Contains(err.Error(), "404") {
			t.Fatal(err)
		}
	}
	if api.state() == before {
		t.Fatal("the modes changed nothing")
	}
	if err := c.restore(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	if got := api.state(); got != before {
		t.Errorf("restored state = %s; want %s", got, before)
	}
	// The restore of slow_query sets all four fields at once, as read.
	if !slices.Contains(api.postLog(), "/storage_service/slow_query?enable=true&fast=false&threshold=123456&ttl=3600") {
		t.Errorf("posts = %q; want an exact slow_query restore", api.postLog())
	}
}

func mustSteps(tb testing.TB, spec string) []step {
	tb.Helper()
	s, err := parseSpec(spec)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func TestUnusedModes(t *testing.T) {
	cfg := Config{Node: "n:1", Sidecar: "s:2", Admin: "http://a", Modes: []string{"off", "zz"},
		ModeSpecs: map[string]string{"zz": "target=h:9", "aa": "POST /x", "bb": "POST /y"}}
	modes, _, err := resolveModes(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := unusedModes(&cfg, modes), []string{"aa", "bb"}; !slices.Equal(got, want) {
		t.Errorf("unusedModes = %v; want %v", got, want)
	}
}

// TestAuditRestore: the audit settings a GET /tracecar/audit gives are put back by one POST
// whose parameters the API accepts: no empty value, names quoted when CQL would change them.
func TestAuditRestore(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"enable":false,"categories":["AUTH","DDL"],"keyspaces":[],"tables":[],"exclude_users":[]}`,
			"categories=AUTH%2CDDL&enable=false&exclude_users=%2A&keyspaces=%2A&tables=%2A"},
		{`{"enable":true,"categories":[],"keyspaces":["ks","Ks"],"tables":["ks.T"],"exclude_users":["bob"]}`,
			"enable=true&exclude_users=bob&keyspaces=ks%2C%22Ks%22&tables=ks.%22T%22"},
	} {
		got, err := auditRestore([]byte(tc.body))
		if err != nil || got != tc.want {
			t.Errorf("auditRestore(%s) = %q, %v; want %q", tc.body, got, err, tc.want)
		}
	}
	if _, err := auditRestore([]byte(`{}`)); err == nil {
		t.Error("auditRestore({}) gave no error")
	}
}
