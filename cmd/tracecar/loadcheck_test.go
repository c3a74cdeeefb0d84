package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tracecar/tracecar/loadcheck"
)

func TestParseLoadcheckFlags(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		check func(loadcheck.Config) bool
	}{
		{"defaults", nil, func(c loadcheck.Config) bool {
			return c.Rounds == loadcheck.DefaultRounds && c.Duration == loadcheck.DefaultDuration && c.Warmup == loadcheck.DefaultWarmup &&
				c.Workload == "write" && c.Concurrency == loadcheck.DefaultConcurrency && c.Rate == 0 && c.Modes == nil
		}},
		{"deployment", []string{"--node", "10.0.0.1:9042", "--sidecar", "10.0.0.1:9043", "--admin", "http://10.0.0.1:10000", "--node-api", "10.0.0.1:10001", "--rate", "10000"}, func(c loadcheck.Config) bool {
			return c.Node == "10.0.0.1:9042" && c.Sidecar == "10.0.0.1:9043" && c.Admin == "http://10.0.0.1:10000" && c.NodeAPI == "10.0.0.1:10001" &&
				c.NodeMetrics == "10.0.0.1:10001/metrics" && c.Rate == 10000
		}},
		{"deployment, unthrottled", []string{"--node", "10.0.0.1:9042", "--unthrottled"}, func(c loadcheck.Config) bool { return c.Rate == 0 }},
		{"adaptive rounds", []string{"--target-error", "0.5", "--max-rounds", "12", "--rounds", "4"}, func(c loadcheck.Config) bool {
			return c.TargetError == 0.5 && c.MaxRounds == 12 && c.Rounds == 4
		}},
		{"default target error", nil, func(c loadcheck.Config) bool {
			return c.TargetError == loadcheck.DefaultTargetError && c.MaxRounds == loadcheck.DefaultMaxRounds && c.MaxTime == loadcheck.DefaultMaxTime
		}},
		{"max time", []string{"--max-time", "5m"}, func(c loadcheck.Config) bool { return c.MaxTime == 5*time.Minute }},
		{"no max time", []string{"--max-time", "0"}, func(c loadcheck.Config) bool { return c.MaxTime < 0 }},
		{"metric budgets", []string{"--max-overhead", "fast=cpu:+0.5us,full=added-p99:200us,full=p99:10%"}, func(c loadcheck.Config) bool {
			return slices.Equal(c.MaxOverhead, []loadcheck.Budget{{Mode: "fast", Metric: "cpu", Limit: 0.5, Absolute: true},
				{Mode: "full", Metric: "added-p99", Limit: 0.2, Absolute: true}, {Mode: "full", Metric: "p99", Limit: 10}})
		}},
		{"modes and budgets", []string{"--modes", "direct, off", "--baseline", "direct", "--max-overhead", "off=0.1%"}, func(c loadcheck.Config) bool {
			return slices.Equal(c.Modes, []string{"direct", "off"}) && c.Baseline == "direct" && slices.Equal(c.MaxOverhead, []loadcheck.Budget{{Mode: "off", Limit: 0.1}})
		}},
		{"custom modes", []string{"--modes", "off,slow,ha", "--mode", "slow=POST /storage_service/slow_query?enable=true&threshold=0", "--mode", "ha=target=127.0.0.1:9044", "--max-overhead", "slow=5,ha=1%"}, func(c loadcheck.Config) bool {
			return len(c.ModeSpecs) == 2 && c.ModeSpecs["ha"] == "target=127.0.0.1:9044" && len(c.MaxOverhead) == 2 && c.MaxOverhead[0] == loadcheck.Budget{Mode: "slow", Limit: 5}
		}},
		{"load shape", []string{"-n", "1000", "--rate", "30000/s", "--concurrency", "4", "--workload", "read", "--pop", "seq=1..1M", "--cl", "quorum", "--compression", "lz4"}, func(c loadcheck.Config) bool {
			return c.Ops == 1000 && c.Rate == 30000 && c.Concurrency == 4 && c.Workload == "read" && c.Pop == "seq=1..1M" && c.CL == "quorum" && c.Compression == "lz4"
		}},
		{"--ops as a count", []string{"--ops", "1000"}, func(c loadcheck.Config) bool { return c.Ops == 1000 && c.OpsMix == "" }},
		{"--ops as a profile's mix", []string{"--profile", profileDir + "/partition_select.yaml", "--ops", "ops(insert=1,partition-select=9)", "--preload", "50", "--page-size", "100"}, func(c loadcheck.Config) bool {
			return c.Ops == 0 && c.OpsMix == "ops(insert=1,partition-select=9)" && c.Profile == profileDir+"/partition_select.yaml" && c.Preload == 50 && c.PageSize == 100
		}},
		{"no preload", []string{"--profile", profileDir + "/partition_select.yaml", "--preload", "0"}, func(c loadcheck.Config) bool { return c.Preload < 0 }},
		{"ratio implies mixed", []string{"--ratio", "write=1,read=3"}, func(c loadcheck.Config) bool { return c.Workload == "mixed" && c.Ratio == "write=1,read=3" }},
		{"no warmup", []string{"--warmup", "0"}, func(c loadcheck.Config) bool { return c.Warmup < 0 }},
		{"reports", []string{"--json", "a.json", "--csv", "a.csv", "--html", "a.html", "--hdr-log", "d", "--duration", "10s"}, func(c loadcheck.Config) bool {
			return c.JSON == "a.json" && c.CSV == "a.csv" && c.HTML == "a.html" && c.HDRLogDir == "d" && c.Duration == 10*time.Second
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseLoadcheckFlags(tt.args, io.Discard)
			if err != nil {
				t.Fatalf("ParseFlags(%q): %v", tt.args, err)
			}
			if !tt.check(cfg.cfg) {
				t.Errorf("ParseFlags(%q) = %+v", tt.args, cfg)
			}
		})
	}
}

func TestParseLoadcheckFlagsErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--bogus"}, "flag provided but not defined"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--rounds", "x"}, "invalid value"},
		{[]string{"--rounds", "0"}, "--rounds 0"},
		{[]string{"--ops", "many"}, "want a count of operations per run, or a profile's mix"},
		{[]string{"--preload", "-1"}, "--preload -1"},
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
		{[]string{"--max-overhead", "fast"}, "want MODE=[METRIC:]LIMIT"},
		{[]string{"--max-overhead", "fast=lots"}, "not a percentage"},
		{[]string{"--max-overhead", "fast=1,fast=2"}, "two default budgets"},
		{[]string{"--modes", "direct,off", "--max-overhead", "fast=5%"}, `names mode "fast", which is not run`},
		{[]string{"--mode", "x=GET /y"}, "--mode x"},
		{[]string{"--mode", "x=POST /y", "--mode", "x=POST /z"}, "defined twice"},
		{[]string{"--node", "n:1", "--rate", "100", "--modes", "off"}, "give --admin URL"},
		{[]string{"--node", "n:1", "--rate", "100", "--modes", "direct,x", "--mode", "x=POST /a"}, "give --admin URL"},
		{[]string{"--node", "n:1"}, "give --rate OP/S"},
		{[]string{"--node", "n:1"}, "--unthrottled"},
		{[]string{"--sidecar", "s:1", "--admin", "a:2", "--rate", "100"}, "--sidecar and --admin need --node"},
		{[]string{"--admin", "a:2"}, "need --node"},
		{[]string{"--node", "n:1", "--rate", "100", "--unthrottled"}, "contradict"},
		{[]string{"--max-overhead", "fast=cpu:lots"}, "neither a percentage nor a duration"},
		{[]string{"--max-overhead", "fast=watts:1"}, `unknown metric "watts"`},
		{[]string{"--max-overhead", "fast=added-p99:5%"}, "absolute limit"},
		{[]string{"--target-error", "-1"}, "--target-error -1"},
		{[]string{"--rounds", "5", "--max-rounds", "3"}, "--max-rounds 3"},
		{[]string{"--max-time", "-1s"}, "--max-time -1s: want a duration, 0 for no limit"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := parseLoadcheckFlags(tt.args, io.Discard)
			if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseFlags(%q) error = %v; want a usage error containing %q", tt.args, err, tt.want)
			}
		})
	}
}

func TestParseLoadcheckFlagsHelp(t *testing.T) {
	var b strings.Builder
	_, err := parseLoadcheckFlags([]string{"-h"}, &b)
	if !errors.Is(err, flag.ErrHelp) || errors.Is(err, errUsage) {
		t.Errorf("error = %v; want flag.ErrHelp, not a usage error", err)
	}
	for _, f := range []string{"-node", "-sidecar", "-admin", "-node-api", "-modes", "-mode", "-baseline", "-rounds", "-duration", "-warmup",
		"-workload", "-ratio", "-pop", "-concurrency", "-rate", "-cl", "-compression", "-max-overhead", "-unthrottled", "-target-error", "-max-rounds", "-node-metrics", "-json", "-csv", "-html", "-hdr-log"} {
		if !strings.Contains(b.String(), "  "+f+" ") && !strings.Contains(b.String(), "  "+f+"\n") {
			t.Errorf("help lacks %s", f)
		}
	}
}

// TestLoadcheckHelpListsBudgetMetrics: `loadcheck -h` names every metric a budget takes,
// cpu-user among them (issue 47, finding 12: the docs named it, the help did not).
func TestLoadcheckHelpListsBudgetMetrics(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"loadcheck", "-h"}, &out, &errOut); code != exitOK {
		t.Fatalf("loadcheck -h: exit %d", code)
	}
	help := out.String() + errOut.String()
	for _, m := range loadcheck.BudgetMetrics {
		if !strings.Contains(help, m.Name+" (") {
			t.Errorf("loadcheck -h does not name the budget metric %s", m.Name)
		}
	}
}
