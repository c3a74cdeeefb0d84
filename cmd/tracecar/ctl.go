package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/admin/ctl"
	"github.com/tracecar/tracecar/audit"
	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/capture"
	"github.com/tracecar/tracecar/tracing/statements"
)

// runCtl parses the ctl command line into a ctl.Config and runs it. On a usage error it
// prints the ctl usage too.
func runCtl(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseCtlFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stderr, ctlUsage)
		return err
	}
	if err != nil {
		fmt.Fprint(stderr, ctlUsage)
		return err
	}
	return ctl.Run(ctx, cfg, stdout)
}

const ctlUsage = `usage: tracecar ctl [--hosts h1:10000,h2:10000 | --hosts-from-cql HOST:PORT [--admin-port P]] [--token T] [--cacert FILE] COMMAND
commands:
  slow-query [--enable|--disable] [--fast|--full] [--threshold 500ms] [--ttl 24h] [--for 10m]
                           set slow-query logging; with no flags, show it
  trace-probability [P] [--for 10m]
                           set the share of requests traced fully, P in [0,1]; without P, show it
  trace-floor [INTERVAL] [--max-per-second N] [--off] [--for 10m]
                           give every statement a full trace per INTERVAL, at most N a second;
                           without it, show it
  logger [NAME [LEVEL]] [--for 10m]
                           set logger NAME to LEVEL (error, warn, info, debug, trace);
                           without LEVEL show NAME's level, without NAME show every level
                           --for DURATION (these, and trace-filter): the change reverts by itself
                           after DURATION (more than 0, at most 168h); ctl status shows the timers
  status                   show mode, counters, sink drops and guardrail state
  ready                    exit 0 when every host's node is reachable (GET /readyz), else 1: a
                           readiness probe for an API that needs a token
  statements [--sort total_time|calls|p99|errors] [--limit 20] [--json] [--include-system]
                           per-statement statistics of every host, merged by statement; the
                           drivers' own system queries only with --include-system
  slow-log [--sort time|duration] [--limit 20] [--min-duration 100ms] [--keyspace K] [--table T]
           [--user U] [--client CIDR] [--since T] [--until T] [--trace-id ID] [--include-system] [--json]
                           the recorded sessions of every host, newest (or slowest) first, one
                           line each; T is an RFC 3339 time
  trace SESSION_ID         one session and its events, the node's included, as cqlsh's TRACING ON
  trace-filter [--keyspace K] [--table T] [--user U] [--client CIDR] [--statement S] [--opcode OP] [--clear] [--for 10m]
                           trace only matching requests (flags ANDed); --clear removes the filter;
                           with no flags, show it
  top [--interval 2s] [--sort total_time|calls|p99|errors] [--per-host] [--count N] [--limit 20] [--include-system]
                           a live view of every host, refreshed in place: op/s and p50/p99 from the
                           merged histograms, tracing mode, guardrail, sink drops; statements by
                           their share of the interval's time; the longest requests in flight.
                           Keys: t c p e sort, s next sort, h per-host rows, space pause, q quit.
                           Plain lines, one refresh after another, when stdout is not a terminal
  capture start [--duration 60s] [--max-bytes 256MiB] [--values shape|keep] | stop | status
                           capture the workload's shape to each sidecar's --capture-dir;
                           stop waits until the file is complete
  audit [--enable|--disable] [--categories L] [--keyspaces L] [--tables L] [--exclude-users L]
                           change the audit log (categories AUTH, DDL, DCL, DML, QUERY, ADMIN;
                           lists comma-separated, * for all); with no flags, show it: settings,
                           policy, records, drops and each sink's state
--hosts defaults to 127.0.0.1:10000; a host without a port gets :10000, and may be an
http:// or https:// URL. --hosts-from-cql HOST:PORT instead reaches every sidecar of a
cluster, as listed in system.local and system.peers read through that sidecar, each at
--admin-port (default 10000) on its IP. --token defaults to $TRACECAR_ADMIN_TOKEN.
exit codes: 0 all hosts ok, 1 a host failed, 2 usage error
`

// common are the flags every command takes, before or after the command name.
type common struct {
	hosts, token, cacert string
	fromCQL, adminPort   string // --hosts-from-cql and --admin-port
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.hosts, "hosts", c.hosts, "comma-separated admin API addresses")
	fs.StringVar(&c.token, "token", c.token, "bearer token of the admin API")
	fs.StringVar(&c.cacert, "cacert", c.cacert, "PEM file of the CA that signed the API's certificate")
	fs.StringVar(&c.fromCQL, "hosts-from-cql", c.fromCQL, "HOST:PORT of one sidecar's CQL port: reach every sidecar it lists in system.local and system.peers, instead of --hosts")
	fs.StringVar(&c.adminPort, "admin-port", c.adminPort, "with --hosts-from-cql, the port of each sidecar's admin API, on the sidecar's IP")
}

// ctlFlagSet returns a flag set whose errors are reported once, by runCtl.
func ctlFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseCtlFlags parses the words after "ctl" into a ctl.Config.
func parseCtlFlags(args []string) (ctl.Config, error) {
	// The token's default stays out of the flag, so that a usage message never prints it.
	c := common{hosts: "127.0.0.1:" + ctl.DefaultPort, adminPort: ctl.DefaultPort}
	fs := ctlFlagSet("ctl")
	c.register(fs)
	if err := parseCtlArgs(fs, args); err != nil {
		return ctl.Config{}, err
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return ctl.Config{}, usageErrorf("no command")
	}
	var build func([]string) (ctl.Command, error)
	switch rest[0] {
	case "slow-query":
		build = func(a []string) (ctl.Command, error) { return ctlSlowQuery(&c, a) }
	case "trace-probability":
		build = func(a []string) (ctl.Command, error) { return ctlTraceProbability(&c, a) }
	case "logger":
		build = func(a []string) (ctl.Command, error) { return ctlLogger(&c, a) }
	case "status":
		build = func(a []string) (ctl.Command, error) { return ctlStatus(&c, a) }
	case "ready":
		build = func(a []string) (ctl.Command, error) { return ctlReady(&c, a) }
	case "statements":
		build = func(a []string) (ctl.Command, error) { return ctlStatements(&c, a) }
	case "trace-filter":
		build = func(a []string) (ctl.Command, error) { return ctlTraceFilter(&c, a) }
	case "trace-floor":
		build = func(a []string) (ctl.Command, error) { return ctlTraceFloor(&c, a) }
	case "top":
		build = func(a []string) (ctl.Command, error) { return ctlTop(&c, a) }
	case "capture":
		build = func(a []string) (ctl.Command, error) { return ctlCapture(&c, a) }
	case "slow-log":
		build = func(a []string) (ctl.Command, error) { return ctlSlowLog(&c, a) }
	case "trace":
		build = func(a []string) (ctl.Command, error) { return ctlTrace(&c, a) }
	case "audit":
		build = func(a []string) (ctl.Command, error) { return ctlAudit(&c, a) }
	default:
		return ctl.Config{}, usageErrorf("unknown command %q: want slow-query, trace-probability, logger, status, statements, slow-log, trace, trace-filter, trace-floor, ready, top, capture or audit", rest[0])
	}
	cmd, err := build(rest[1:])
	if err != nil {
		return ctl.Config{}, err
	}
	var hosts []string
	if c.fromCQL == "" {
		if hosts, err = parseHosts(c.hosts); err != nil {
			return ctl.Config{}, err
		}
	} else {
		if _, _, err := net.SplitHostPort(c.fromCQL); err != nil {
			return ctl.Config{}, usageErrorf("--hosts-from-cql %q: want the HOST:PORT of a sidecar's CQL port", c.fromCQL)
		}
		if n, err := strconv.Atoi(c.adminPort); err != nil || n < 1 || n > 65535 {
			return ctl.Config{}, usageErrorf("--admin-port %q: want a port from 1 to 65535", c.adminPort)
		}
	}
	if c.token == "" {
		c.token = os.Getenv("TRACECAR_ADMIN_TOKEN")
	}
	return ctl.Config{Hosts: hosts, Token: c.token, CACert: c.cacert, Command: cmd,
		HostsFromCQL: c.fromCQL, AdminPort: c.adminPort}, nil
}

// parseCtlArgs parses fs, turning its errors into usage errors.
func parseCtlArgs(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageErrorf("%s: %v", fs.Name(), err)
	}
	return nil
}

func ctlSlowQuery(c *common, args []string) (ctl.Command, error) {
	fs := ctlFlagSet("slow-query")
	c.register(fs)
	enable := fs.Bool("enable", false, "turn slow-query logging on")
	disable := fs.Bool("disable", false, "turn slow-query logging off")
	fast := fs.Bool("fast", false, "fast mode: sessions without events")
	full := fs.Bool("full", false, "full mode: sessions with events")
	threshold := fs.String("threshold", "", "latency above which a query is slow, such as 500ms")
	ttl := fs.String("ttl", "", "time to live of recorded sessions, such as 24h")
	forD := forFlag(fs)
	if err := parseCtlArgs(fs, args); err != nil {
		return ctl.Command{}, err
	}
	if fs.NArg() > 0 {
		return ctl.Command{}, usageErrorf("slow-query takes only flags, got %q", fs.Args())
	}
	p := url.Values{}
	switch {
	case *enable && *disable:
		return ctl.Command{}, usageErrorf("slow-query: --enable and --disable contradict each other")
	case *enable:
		p.Set("enable", "true")
	case *disable:
		p.Set("enable", "false")
	}
	switch {
	case *fast && *full:
		return ctl.Command{}, usageErrorf("slow-query: --fast and --full contradict each other")
	case *fast:
		p.Set("fast", "true")
	case *full:
		p.Set("fast", "false")
	}
	if *threshold != "" {
		d, err := time.ParseDuration(*threshold)
		if err != nil || d < 0 || d%time.Microsecond != 0 {
			return ctl.Command{}, usageErrorf("slow-query: --threshold %q: want a duration of whole microseconds, 0 or more, such as 500ms", *threshold)
		}
		p.Set("threshold", strconv.FormatInt(d.Microseconds(), 10))
	}
	if *ttl != "" {
		d, err := time.ParseDuration(*ttl)
		if err != nil || d < 0 || d%time.Second != 0 || d/time.Second > 630720000 {
			return ctl.Command{}, usageErrorf("slow-query: --ttl %q: want a duration of whole seconds from 0 to 175200h (20 years), such as 24h", *ttl)
		}
		p.Set("ttl", strconv.FormatInt(int64(d/time.Second), 10))
	}
	o := ctl.Command{Name: ctl.SlowQuery}
	if len(p) > 0 {
		o.Change = p
	}
	return o, withFor("slow-query", *forD, o.Change)
}

// forFlag defines --for, the time after which a change reverts.
func forFlag(fs *flag.FlagSet) *string {
	return fs.String("for", "", "revert the change after this `DURATION`, such as 10m or 90s (more than 0, at most 168h)")
}

// withFor checks --for and adds it to the change, which it needs.
func withFor(cmd, d string, change url.Values) error {
	if d == "" {
		return nil
	}
	v, err := time.ParseDuration(d)
	if err != nil || v <= 0 || v > admin.MaxToggleFor {
		return usageErrorf("%s: --for %q: want a duration more than 0 and at most 168h (7 days), such as 10m or 90s", cmd, d)
	}
	if change == nil {
		return usageErrorf("%s: --for needs a change to revert", cmd)
	}
	change.Set("for", d)
	return nil
}

func ctlTraceProbability(c *common, args []string) (ctl.Command, error) {
	fs := ctlFlagSet("trace-probability")
	c.register(fs)
	forD := forFlag(fs)
	if err := parseCtlArgs(fs, args); err != nil {
		return ctl.Command{}, err
	}
	o := ctl.Command{Name: ctl.TraceProbability}
	switch fs.NArg() {
	case 0:
		return o, withFor("trace-probability", *forD, nil)
	case 1:
	default:
		return ctl.Command{}, usageErrorf("trace-probability takes one number, got %q", fs.Args())
	}
	s := fs.Arg(0)
	p, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(p) || p < 0 || p > 1 {
		return ctl.Command{}, usageErrorf("trace-probability %q: want a number from 0 to 1, such as 0.01", s)
	}
	o.Change = url.Values{"probability": {s}}
	return o, withFor("trace-probability", *forD, o.Change)
}

func ctlLogger(c *common, args []string) (ctl.Command, error) {
	fs := ctlFlagSet("logger")
	c.register(fs)
	forD := forFlag(fs)
	if err := parseCtlArgs(fs, args); err != nil {
		return ctl.Command{}, err
	}
	switch fs.NArg() {
	case 0:
		return ctl.Command{Name: ctl.Logger}, withFor("logger", *forD, nil)
	case 1, 2:
	default:
		return ctl.Command{}, usageErrorf("logger takes NAME and LEVEL, got %q", fs.Args())
	}
	name := fs.Arg(0)
	if name == "" || strings.ContainsAny(name, "/?#") {
		return ctl.Command{}, usageErrorf("logger name %q is not a logger name", name)
	}
	o := ctl.Command{Name: ctl.Logger, Logger: name}
	if fs.NArg() == 2 {
		level := strings.ToLower(fs.Arg(1))
		if !slices.Contains(logs.Levels, level) {
			return ctl.Command{}, usageErrorf("logger level %q: want one of %s", fs.Arg(1), strings.Join(logs.Levels, ", "))
		}
		o.Change = url.Values{"level": {level}}
	}
	return o, withFor("logger", *forD, o.Change)
}

func ctlStatus(c *common, args []string) (ctl.Command, error) {
	fs := ctlFlagSet("status")
	c.register(fs)
	if err := parseCtlArgs(fs, args); err != nil {
		return ctl.Command{}, err
	}
	if fs.NArg() > 0 {
		return ctl.Command{}, usageErrorf("status takes no arguments, got %q", fs.Args())
	}
	return ctl.Command{Name: ctl.Status}, nil
}

// parseHosts splits the --hosts list into base URLs.
func parseHosts(s string) ([]string, error) {
	var out []string
	for _, h := range strings.Split(s, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		base := h
		if !strings.Contains(h, "://") {
			base = "http://" + h
		}
		u, err := url.Parse(base)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || (u.Path != "" && u.Path != "/") {
			return nil, usageErrorf("--hosts: %q is not host:port or an http(s) URL", h)
		}
		if u.Port() == "" {
			u.Host += ":" + ctl.DefaultPort
		}
		out = append(out, u.Scheme+"://"+u.Host)
	}
	if len(out) == 0 {
		return nil, usageErrorf("--hosts is empty")
	}
	return out, nil
}

func ctlStatements(c *common, args []string) (ctl.Command, error) {
	fs := ctlFlagSet("statements")
	c.register(fs)
	order := fs.String("sort", "total_time", "sort by total_time, calls, p99 or errors")
	limit := fs.Int("limit", 20, "statements shown")
	asJSON := fs.Bool("json", false, "print the merged statements as JSON")
	system := fs.Bool("include-system", false, "show the queries of the node's own keyspaces (system, system_schema…) that drivers send on their own")
	if err := parseCtlArgs(fs, args); err != nil {
		return ctl.Command{}, err
	}
	if fs.NArg() > 0 {
		return ctl.Command{}, usageErrorf("statements takes only flags, got %q", fs.Args())
	}
	if !slices.Contains(statements.SortOrders, *order) {
		return ctl.Command{}, usageErrorf("statements: --sort %q: want one of %s", *order, strings.Join(statements.SortOrders, ", "))
	}
	if *limit < 1 {
		return ctl.Command{}, usageErrorf("statements: --limit must be at least 1, got %d", *limit)
	}
	return ctl.Command{Name: ctl.Statements, Sort: *order, Limit: *limit, JSON: *asJSON, IncludeSystem: *system}, nil
}

func ctlTraceFilter(c *common, args []string) (ctl.Command, error) {
	fs := ctlFlagSet("trace-filter")
	c.register(fs)
	vals := map[string]*string{}
	for _, n := range tracing.FilterParams {
		vals[n] = fs.String(n, "", "trace only requests with this "+n)
	}
	clear := fs.Bool("clear", false, "remove the filter: trace every request again")
	forD := forFlag(fs)
	if err := parseCtlArgs(fs, args); err != nil {
		return ctl.Command{}, err
	}
	if fs.NArg() > 0 {
		return ctl.Command{}, usageErrorf("trace-filter takes only flags, got %q", fs.Args())
	}
	p := url.Values{}
	for _, n := range tracing.FilterParams {
		if v := *vals[n]; v != "" {
			p.Set(n, v)
		}
	}
	cmd := ctl.Command{Name: ctl.TraceFilter, Clear: *clear}
	switch {
	case *clear && len(p) > 0:
		return ctl.Command{}, usageErrorf("trace-filter: --clear takes no filter flags")
	case len(p) > 0:
		cmd.Change = p
	}
	return cmd, withFor("trace-filter", *forD, cmd.Change)
}

func ctlTraceFloor(c *common, args []string) (ctl.Command, error) {
	fs := ctlFlagSet("trace-floor")
	c.register(fs)
	maxPS := fs.Int("max-per-second", 0, "at most this many floor traces a second over all statements (default: the sidecar's, 10 at first)")
	off := fs.Bool("off", false, "turn the trace floor off")
	forD := forFlag(fs)
	if err := parseCtlArgs(fs, args); err != nil {
		return ctl.Command{}, err
	}
	cmd := ctl.Command{Name: ctl.TraceFloor, Clear: *off}
	if *off && *forD != "" {
		return ctl.Command{}, usageErrorf("trace-floor: --off takes no --for (turn it on with --for instead)")
	}
	switch {
	case fs.NArg() > 1:
		return ctl.Command{}, usageErrorf("trace-floor takes one interval, got %q", fs.Args())
	case *off && (fs.NArg() > 0 || *maxPS != 0):
		return ctl.Command{}, usageErrorf("trace-floor: --off takes no interval or --max-per-second")
	case *maxPS < 0:
		return ctl.Command{}, usageErrorf("trace-floor --max-per-second %d: want a number of traces from 1", *maxPS)
	case fs.NArg() == 0 && *maxPS > 0:
		return ctl.Command{}, usageErrorf("trace-floor --max-per-second needs an interval, such as: trace-floor 60s --max-per-second 5")
	case fs.NArg() == 1:
		var d floorFlag
		d.d = new(time.Duration)
		if err := d.Set(fs.Arg(0)); err != nil {
			return ctl.Command{}, usageErrorf("trace-floor %q: %v", fs.Arg(0), err)
		}
		cmd.Change = url.Values{"interval": {fs.Arg(0)}}
		if *maxPS > 0 {
			cmd.Change.Set("max_per_second", strconv.Itoa(*maxPS))
		}
	}
	return cmd, withFor("trace-floor", *forD, cmd.Change)
}

func ctlTop(c *common, args []string) (ctl.Command, error) {
	fs := ctlFlagSet("top")
	c.register(fs)
	interval := fs.Duration("interval", ctl.DefaultTopInterval, "refresh interval")
	order := fs.String("sort", "total_time", "sort statements by total_time, calls, p99 or errors over the interval")
	perHost := fs.Bool("per-host", false, "show a row per host under the cluster's (key h)")
	count := fs.Int("count", 0, "refreshes shown before exiting (0: until q)")
	limit := fs.Int("limit", 20, "statements per refresh in plain lines")
	system := fs.Bool("include-system", false, "show the queries of the node's own keyspaces (system, system_schema…) that drivers send on their own")
	if err := parseCtlArgs(fs, args); err != nil {
		return ctl.Command{}, err
	}
	if fs.NArg() > 0 {
		return ctl.Command{}, usageErrorf("top takes only flags, got %q", fs.Args())
	}
	if *interval < 100*time.Millisecond {
		return ctl.Command{}, usageErrorf("top: --interval %v: want at least 100ms, such as 2s", *interval)
	}
	if !slices.Contains(ctl.TopSortOrders, *order) {
		return ctl.Command{}, usageErrorf("top: --sort %q: want one of %s", *order, strings.Join(ctl.TopSortOrders, ", "))
	}
	if *count < 0 {
		return ctl.Command{}, usageErrorf("top: --count must be 0 (until q) or more, got %d", *count)
	}
	if *limit < 1 {
		return ctl.Command{}, usageErrorf("top: --limit must be at least 1, got %d", *limit)
	}
	return ctl.Command{Name: ctl.Top, Interval: *interval, Sort: *order, PerHost: *perHost, Count: *count, Limit: *limit, IncludeSystem: *system}, nil
}

func ctlReady(c *common, args []string) (ctl.Command, error) {
	fs := ctlFlagSet("ready")
	c.register(fs)
	if err := parseCtlArgs(fs, args); err != nil {
		return ctl.Command{}, err
	}
	if fs.NArg() > 0 {
		return ctl.Command{}, usageErrorf("ready takes no arguments, got %q", fs.Args())
	}
	return ctl.Command{Name: ctl.Ready}, nil
}

// slowLogFlags are ctl slow-log's filters: each flag is the GET /tracecar/slow_log
// parameter of the same name, with - for _.
var slowLogFlags = []struct{ flag, param, usage string }{
	{"min-duration", "min_duration", "only sessions at least this long, such as 100ms"},
	{"keyspace", "keyspace", "only statements on this keyspace"},
	{"table", "table", "only statements on this table, or keyspace.table"},
	{"user", "user", "only sessions of this user"},
	{"client", "client", "only sessions from this client address or CIDR"},
	{"since", "since", "only sessions started at or after this RFC 3339 time"},
	{"until", "until", "only sessions started at or before this RFC 3339 time"},
	{"trace-id", "trace_id", "only sessions of this W3C trace"},
}

func ctlSlowLog(c *common, args []string) (ctl.Command, error) {
	fs := ctlFlagSet("slow-log")
	c.register(fs)
	order := fs.String("sort", "time", "time (newest first) or duration (slowest first)")
	limit := fs.Int("limit", ctl.DefaultSlowLogLimit, "sessions shown")
	asJSON := fs.Bool("json", false, "print the sessions as JSON")
	system := fs.Bool("include-system", false, "show the queries of the node's own keyspaces (system, system_schema…) that drivers send on their own")
	vals := make([]*string, len(slowLogFlags))
	for i, f := range slowLogFlags {
		vals[i] = fs.String(f.flag, "", f.usage)
	}
	if err := parseCtlArgs(fs, args); err != nil {
		return ctl.Command{}, err
	}
	if fs.NArg() > 0 {
		return ctl.Command{}, usageErrorf("slow-log takes only flags, got %q", fs.Args())
	}
	if *order != "time" && *order != "duration" {
		return ctl.Command{}, usageErrorf("slow-log: --sort %q: want time (newest first) or duration (slowest first)", *order)
	}
	if *limit < 1 || *limit > admin.MaxSlowLogLimit {
		return ctl.Command{}, usageErrorf("slow-log: --limit %d: want 1 to %d", *limit, admin.MaxSlowLogLimit)
	}
	q := url.Values{}
	for i, f := range slowLogFlags {
		if *vals[i] != "" {
			q.Set(f.param, *vals[i])
		}
	}
	return ctl.Command{Name: ctl.SlowLog, Sort: *order, Limit: *limit, JSON: *asJSON, IncludeSystem: *system, Query: q}, nil
}

func ctlTrace(c *common, args []string) (ctl.Command, error) {
	fs := ctlFlagSet("trace")
	c.register(fs)
	if err := parseCtlArgs(fs, args); err != nil {
		return ctl.Command{}, err
	}
	if fs.NArg() != 1 || fs.Arg(0) == "" {
		return ctl.Command{}, usageErrorf("trace takes one session id (from slow-log), got %q", fs.Args())
	}
	return ctl.Command{Name: ctl.Trace, Session: fs.Arg(0)}, nil
}

// ctlAudit parses "tracecar ctl audit": with no flags it shows each host's audit log; with
// flags it changes what they name on every host. The values are checked here first, so
// that a typo is a usage error before any host is asked.
func ctlAudit(c *common, args []string) (ctl.Command, error) {
	fs := ctlFlagSet("audit")
	c.register(fs)
	enable := fs.Bool("enable", false, "turn the audit log on")
	disable := fs.Bool("disable", false, "turn the audit log off (itself recorded)")
	lists := map[string]*string{}
	for _, p := range []struct{ flag, param, usage string }{
		{"categories", "categories", "audited categories, comma-separated: AUTH, DDL, DCL, DML, QUERY, ADMIN"},
		{"keyspaces", "keyspaces", "keyspaces audited (DDL, DML, QUERY), comma-separated; * for all"},
		{"tables", "tables", "keyspace.table names audited, comma-separated; * for all"},
		{"exclude-users", "exclude_users", "users never audited, comma-separated; * for none"},
	} {
		lists[p.param] = fs.String(p.flag, "", p.usage)
	}
	if err := parseCtlArgs(fs, args); err != nil {
		return ctl.Command{}, err
	}
	if fs.NArg() > 0 {
		return ctl.Command{}, usageErrorf("audit takes only flags, got %q", fs.Args())
	}
	if *enable && *disable {
		return ctl.Command{}, usageErrorf("audit: --enable and --disable contradict each other")
	}
	p := url.Values{}
	if *enable || *disable {
		p.Set("enable", strconv.FormatBool(*enable))
	}
	for name, v := range lists {
		if *v != "" {
			p.Set(name, *v)
		}
	}
	cmd := ctl.Command{Name: ctl.Audit}
	if len(p) == 0 {
		return cmd, nil
	}
	check := map[string]string{}
	for k := range p {
		check[k] = p.Get(k)
	}
	if _, err := audit.ParseSettings(audit.Settings{}, check); err != nil {
		return ctl.Command{}, usageErrorf("audit: --%s", strings.Replace(err.Error(), "exclude_users", "exclude-users", 1))
	}
	cmd.Change = p
	return cmd, nil
}

func ctlCapture(c *common, args []string) (ctl.Command, error) {
	fs := ctlFlagSet("capture")
	c.register(fs)
	if err := parseCtlArgs(fs, args); err != nil {
		return ctl.Command{}, err
	}
	if fs.NArg() == 0 {
		return ctl.Command{}, usageErrorf("capture: want start, stop or status")
	}
	cmd := ctl.Command{Name: ctl.Capture}
	sub, rest := fs.Arg(0), fs.Args()[1:]
	switch sub {
	case "start":
		sfs := ctlFlagSet("capture start")
		c.register(sfs)
		dur := sfs.Duration("duration", capture.DefaultDuration, "how long to capture")
		maxBytes := sfs.String("max-bytes", "256MiB", "the capture file's largest size, such as 256MiB")
		values := sfs.String("values", "shape", "shape (no value is written) or keep (bound values are written: personal data)")
		if err := parseCtlArgs(sfs, rest); err != nil {
			return ctl.Command{}, err
		}
		if sfs.NArg() > 0 {
			return ctl.Command{}, usageErrorf("capture start takes only flags, got %q", sfs.Args())
		}
		switch {
		case *dur <= 0 || *dur > capture.MaxDuration:
			return ctl.Command{}, usageErrorf("capture start: --duration %v: want more than 0 and at most %v", *dur, capture.MaxDuration)
		case *values != "shape" && *values != "keep":
			return ctl.Command{}, usageErrorf("capture start: --values %q: want shape or keep", *values)
		}
		cmd.Change = url.Values{"enable": {"true"}, "duration": {dur.String()}, "max_bytes": {*maxBytes}, "values": {*values}}
	case "stop":
		if len(rest) > 0 {
			return ctl.Command{}, usageErrorf("capture stop takes no arguments, got %q", rest)
		}
		cmd.Change = url.Values{"enable": {"false"}}
	case "status":
		if len(rest) > 0 {
			return ctl.Command{}, usageErrorf("capture status takes no arguments, got %q", rest)
		}
	default:
		return ctl.Command{}, usageErrorf("capture %q: want start, stop or status", sub)
	}
	return cmd, nil
}
