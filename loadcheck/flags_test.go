package loadcheck

import (
	"errors"
	"flag"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		check func(Config) bool
	}{
		{"defaults", nil, func(c Config) bool {
			return c.Rounds == DefaultRounds && c.Duration == DefaultDuration && c.Warmup == DefaultWarmup &&
				c.Workload == "write" && c.Concurrency == DefaultConcurrency && c.Rate == 0 && c.Modes == nil
		}},
		{"deployment", []string{"--node", "10.0.0.1:9042", "--sidecar", "10.0.0.1:9043", "--admin", "http://10.0.0.1:10000", "--node-api", "10.0.0.1:10001"}, func(c Config) bool {
			return c.Node == "10.0.0.1:9042" && c.Sidecar == "10.0.0.1:9043" && c.Admin == "http://10.0.0.1:10000" && c.NodeAPI == "10.0.0.1:10001"
		}},
		{"modes and budgets", []string{"--modes", "direct, off", "--baseline", "direct", "--max-overhead", "off=0.1%"}, func(c Config) bool {
			return slices.Equal(c.Modes, []string{"direct", "off"}) && c.Baseline == "direct" && maps.Equal(c.MaxOverhead, map[string]float64{"off": 0.1})
		}},
		{"custom modes", []string{"--mode", "slow=POST /storage_service/slow_query?enable=true&threshold=0", "--mode", "ha=target=127.0.0.1:9044", "--max-overhead", "slow=5,ha=1%"}, func(c Config) bool {
			return len(c.ModeSpecs) == 2 && c.ModeSpecs["ha"] == "target=127.0.0.1:9044" && c.MaxOverhead["slow"] == 5
		}},
		{"load shape", []string{"-n", "1000", "--rate", "30000/s", "--concurrency", "4", "--workload", "read", "--pop", "seq=1..1M", "--cl", "quorum", "--compression", "lz4"}, func(c Config) bool {
			return c.Ops == 1000 && c.Rate == 30000 && c.Concurrency == 4 && c.Workload == "read" && c.Pop == "seq=1..1M" && c.CL == "quorum" && c.Compression == "lz4"
		}},
		{"ratio implies mixed", []string{"--ratio", "write=1,read=3"}, func(c Config) bool { return c.Workload == "mixed" && c.Ratio == "write=1,read=3" }},
		{"no warmup", []string{"--warmup", "0"}, func(c Config) bool { return c.Warmup < 0 }},
		{"reports", []string{"--json", "a.json", "--csv", "a.csv", "--html", "a.html", "--hdr-log", "d", "--duration", "10s"}, func(c Config) bool {
			return c.JSON == "a.json" && c.CSV == "a.csv" && c.HTML == "a.html" && c.HDRLogDir == "d" && c.Duration == 10*time.Second
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ParseFlags(tt.args, io.Discard)
			if err != nil {
				t.Fatalf("ParseFlags(%q): %v", tt.args, err)
			}
			if !tt.check(cfg) {
				t.Errorf("ParseFlags(%q) = %+v", tt.args, cfg)
			}
		})
	}
}

func TestParseFlagsErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--bogus"}, "flag provided but not defined"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--rounds", "x"}, "invalid value"},
		{[]string{"--rounds", "0"}, "--rounds 0"},
		{[]string{"--duration", "0s"}, "--duration 0s"},
		{[]string{"--concurrency", "0"}, "--concurrency 0"},
		{[]string{"--rate", "fast"}, `--rate "fast"`},
		{[]string{"--rate", "-5"}, `--rate "-5"`},
		{[]string{"--workload", "scan"}, `--workload "scan"`},
		{[]string{"--workload", "write", "--ratio", "write=1,read=1"}, "--ratio applies to --workload mixed"},
		{[]string{"--ratio", "write=1,read=-1"}, "non-negative weights"},
		{[]string{"--ratio", "write=0,read=0"}, "add up to zero"},
		{[]string{"--pop", "uniform(10..1)"}, "0 ≤ min ≤ max"},
		{[]string{"--pop", "zipf(1..10)"}, "unknown form"},
		{[]string{"--cl", "MOST"}, `--cl "MOST"`},
		{[]string{"--compression", "zstd"}, `--compression "zstd"`},
		{[]string{"--modes", "off,turbo"}, `unknown mode "turbo"`},
		{[]string{"--modes", ","}, "names no mode"},
		{[]string{"--modes", "off,off"}, "listed twice"},
		{[]string{"--max-overhead", "fast"}, "want MODE=PCT"},
		{[]string{"--max-overhead", "fast=lots"}, "want MODE=PCT"},
		{[]string{"--max-overhead", "fast=1,fast=2"}, "two budgets"},
		{[]string{"--modes", "direct,off", "--max-overhead", "fast=5%"}, `names mode "fast", which is not run`},
		{[]string{"--mode", "x=GET /y"}, "--mode x"},
		{[]string{"--mode", "x=POST /y", "--mode", "x=POST /z"}, "defined twice"},
		{[]string{"--node", "n:1", "--modes", "off"}, "give --admin URL"},
		{[]string{"--node", "n:1", "--modes", "direct,x", "--mode", "x=POST /a"}, "give --admin URL"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := ParseFlags(tt.args, io.Discard)
			if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseFlags(%q) error = %v; want a usage error containing %q", tt.args, err, tt.want)
			}
		})
	}
}

func TestParseFlagsHelp(t *testing.T) {
	var b strings.Builder
	_, err := ParseFlags([]string{"-h"}, &b)
	if !errors.Is(err, flag.ErrHelp) || errors.Is(err, ErrUsage) {
		t.Errorf("error = %v; want flag.ErrHelp, not a usage error", err)
	}
	for _, f := range []string{"-node", "-sidecar", "-admin", "-node-api", "-modes", "-mode", "-baseline", "-rounds", "-duration", "-warmup",
		"-workload", "-ratio", "-pop", "-concurrency", "-rate", "-cl", "-compression", "-max-overhead", "-json", "-csv", "-html", "-hdr-log"} {
		if !strings.Contains(b.String(), "  "+f+" ") && !strings.Contains(b.String(), "  "+f+"\n") {
			t.Errorf("help lacks %s", f)
		}
	}
}

func TestParsePop(t *testing.T) {
	tests := []struct {
		in   string
		want string
		size int64
	}{
		{"seq=1..100", "seq=1..100", 100},
		{"uniform(1..1M)", "uniform(1..1000000)", 1000000},
		{"gaussian(1..1k)", "gaussian(1..1000,3)", 1000},
		{"dist=gaussian(10..20,2)", "gaussian(10..20,2)", 11},
		{"uniform( 5 .. 5 )", "uniform(5..5)", 1},
	}
	for _, tt := range tests {
		p, err := parsePop(tt.in)
		if err != nil || p.String() != tt.want || p.size() != tt.size {
			t.Errorf("parsePop(%q) = %v (size %d), %v; want %s (size %d)", tt.in, p, p.size(), err, tt.want, tt.size)
		}
	}
}
