// Package ctl is "tracecar ctl", a nodetool-style client of the admin API that applies one
// change to many sidecars at once. The tracecar command parses the command line into a
// Config.
//
//	tracecar ctl [--hosts h1:10000,h2:10000] [--token T] slow-query [--enable|--disable] [--fast|--full]
//	             [--threshold 500ms] [--ttl 24h]
//	tracecar ctl [--hosts …] trace-probability [P]
//	tracecar ctl [--hosts …] logger [NAME [LEVEL]]
//	tracecar ctl [--hosts …] status
//	tracecar ctl [--hosts …] statements [--sort total_time|calls|p99|errors] [--limit 20] [--json]
//	tracecar ctl [--hosts …] trace-filter [--keyspace K] [--table T] [--user U] [--client CIDR]
//	             [--statement S] [--opcode OP] [--clear]
//	tracecar ctl [--hosts …] ready
//	tracecar ctl [--hosts …] top [--interval 2s] [--sort total_time|calls|p99|errors] [--per-host] [--count N]
//	tracecar ctl [--hosts …] slow-log [--sort time|duration] [--limit 20] [--min-duration D] [--keyspace K]
//	             [--table T] [--user U] [--client CIDR] [--since T] [--until T] [--trace-id ID] [--include-system] [--json]
//	tracecar ctl [--hosts …] trace SESSION_ID
//	tracecar ctl [--hosts …] capture start [--duration 60s] [--max-bytes 256MiB] [--values shape|keep] | stop | status
//	tracecar ctl [--hosts …] audit [--enable|--disable] [--categories L] [--keyspaces L] [--tables L] [--exclude-users L]
//
// Every host gets the request in parallel; a host that fails does not stop the others. A
// change is read back from each host after it is applied, so the table shows what each host
// now has. Without a change (slow-query with no flags, trace-probability with no P, logger
// with no LEVEL) the command only reads.
//
// # Layers
//
// The files of the package are layers: a file uses declarations of the files below it,
// never of one above it (ci.TestFilesPointDown fails on a cycle, and prints it). From the
// ground up:
//
//	config.go              Config, Command and the commands' names, the port and timeout
//	audit.go, capture.go, trace_filter.go, trace_floor.go
//	                       a route's answer shown as a table's detail
//	client.go              the admin API client, with the token and the CA
//	discover.go            the hosts found from a sidecar's system.local and system.peers
//	slowlog.go             slow-log and trace
//	top.go                 top's readings of every host and the view they make
//	statements.go          statements, merged across the hosts
//	top_render.go          the view laid out as lines, and top's plain output
//	top_screen.go          top's full screen
//	top_run.go             the top command: full screen on a terminal, plain lines else
//	ctl.go                 Run: the other commands, a change and its read-back on every host
package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/tracecar/tracecar/admin/adminapi"
	"github.com/tracecar/tracecar/internal/buildinfo"
)

// Run applies cfg.Command to every host in parallel and writes one table row per host to
// stdout. It returns ErrHostFailed, after the table, when any host failed.
func Run(ctx context.Context, cfg Config, stdout io.Writer) error {
	if cfg.HostsFromCQL != "" {
		port := cfg.AdminPort
		if port == "" {
			port = DefaultPort
		}
		var err error
		if cfg.Hosts, err = discoverHosts(ctx, cfg.HostsFromCQL, port); err != nil {
			return err
		}
	}
	switch cfg.Command.Name {
	case Statements:
		return runStatements(ctx, cfg, stdout)
	case Top:
		return runTop(ctx, cfg, stdout)
	case SlowLog:
		return runSlowLog(ctx, cfg, stdout)
	case Trace:
		return runTrace(ctx, cfg, stdout)
	}
	o, err := opOf(cfg.Command)
	if err != nil {
		return err
	}
	cl, err := newClient(cfg.Token, cfg.CACert)
	if err != nil {
		return err
	}
	if !printTable(stdout, apply(ctx, cl, cfg.Hosts, o)) {
		return ErrHostFailed
	}
	return nil
}

// opOf returns the requests and the display of cmd.
func opOf(cmd Command) (op, error) {
	var o op
	switch cmd.Name {
	case SlowQuery:
		o = op{get: adminapi.PathSlowQuery, show: showSlowQuery}
	case TraceProbability:
		o = op{get: adminapi.PathProbability, show: func(body []byte) (string, error) {
			p, err := adminapi.ParseProbability(body)
			if err != nil {
				return "", err
			}
			f, _ := strconv.ParseFloat(p, 64)
			return "probability=" + strconv.FormatFloat(f, 'g', -1, 64), nil
		}}
	case Logger:
		if cmd.Logger == "" {
			if cmd.Change != nil {
				return op{}, errors.New("ctl: a logger change needs the logger's name")
			}
			return op{get: adminapi.PathLoggingLevel, show: showLevels}, nil
		}
		name := cmd.Logger
		o = op{get: adminapi.PathLoggers + "/" + url.PathEscape(name), show: func(body []byte) (string, error) {
			l, err := adminapi.ParseLevel(body)
			if err != nil {
				return "", err
			}
			return name + "=" + l, nil
		}}
	case Status:
		if cmd.Change != nil {
			return op{}, errors.New("ctl: status changes nothing")
		}
		return op{get: adminapi.PathStatus, show: showStatus}, nil
	case Ready:
		// A probe for an API that needs a token, from inside the container, as Kubernetes
		// exec probes run it: /readyz answers 503 while the node is unreachable.
		if cmd.Change != nil {
			return op{}, errors.New("ctl: ready changes nothing")
		}
		return op{get: "/readyz", show: func([]byte) (string, error) { return "ready", nil }}, nil
	case Capture:
		o = op{get: adminapi.PathCapture, show: showCapture}
	case Audit:
		o = op{get: adminapi.PathAudit, show: showAudit}
	case TraceFilter:
		o = op{get: adminapi.PathTraceFilter, show: showTraceFilter}
		if cmd.Clear {
			if cmd.Change != nil {
				return op{}, errors.New("ctl: clearing the trace filter takes no filter parameters")
			}
			o.del = adminapi.PathTraceFilter
			return o, nil
		}
	case TraceFloor:
		o = op{get: adminapi.PathTraceFloor, show: showTraceFloor}
		if cmd.Clear {
			if cmd.Change != nil {
				return op{}, errors.New("ctl: turning the trace floor off takes no parameters")
			}
			o.del = adminapi.PathTraceFloor
			return o, nil
		}
	default:
		return op{}, fmt.Errorf("ctl: unknown command %q", cmd.Name)
	}
	if cmd.Change != nil {
		o.post, o.params = o.get, cmd.Change
	}
	return o, nil
}

// op is what one command does on one host: an optional change, then a read whose JSON
// body show turns into the table's detail.
type op struct {
	post   string     // path of the change, "" for a read-only command
	del    string     // path DELETEd before the read, "" for none
	params url.Values // of the change
	get    string     // path read after the change
	show   func(body []byte) (string, error)
}

func showSlowQuery(body []byte) (string, error) {
	sq, err := adminapi.ParseSlowQuery(body)
	if err != nil {
		return "", err
	}
	return sq.String(), nil
}

func showLevels(body []byte) (string, error) {
	kv, err := adminapi.ParseLoggingLevels(body)
	if err != nil {
		return "", err
	}
	parts := make([]string, len(kv))
	for i, e := range kv {
		parts[i] = e.Key + "=" + e.Value
	}
	return strings.Join(parts, " "), nil
}

func showStatus(body []byte) (string, error) {
	st, err := adminapi.ParseStatus(body)
	if err != nil {
		return "", err
	}
	mode := st.Mode
	if mode == "" {
		mode = "none"
	}
	s := fmt.Sprintf("mode=%s requests=%d traced=%d slow=%d", mode, st.Counters.Requests, st.Counters.Traced, st.Counters.SlowSessions)
	sinks := make([]string, 0, len(st.SinkDropped))
	for k := range st.SinkDropped {
		sinks = append(sinks, k)
	}
	sort.Strings(sinks)
	for _, k := range sinks {
		if n := st.SinkDropped[k]; n > 0 {
			s += fmt.Sprintf(" dropped[%s]=%d", k, n)
		}
	}
	if st.Guardrail.State != "" && st.Guardrail.State != "none" {
		s += " guardrail=" + st.Guardrail.State
		if st.Guardrail.Detail != "" {
			s += " (" + st.Guardrail.Detail + ")"
		}
	}
	if a := st.Audit; a != nil && (a.Enabled || a.Dropped > 0 || a.Error != "") {
		s += " audit=" + auditLine(*a)
	}
	if l := st.NodeLogin; l != nil && (l.State == "refused" || l.State == "failed") {
		s += fmt.Sprintf(" node_login=%s (user %q, refused %d: %s)", l.State, l.User, l.Refused, l.Error)
	}
	for _, t := range st.Timers {
		parts := make([]string, len(t.Settings))
		for i, set := range t.Settings {
			parts[i] = set.Setting + "→" + strconv.Quote(set.RevertTo)
		}
		s += " timer=" + strings.Join(parts, ",") + "@" + t.Due.UTC().Format(time.RFC3339)
		if t.Imposed {
			s += "(toggle-max-duration)"
		}
	}
	if sh := st.Shards; sh != nil {
		s += fmt.Sprintf(" cross_shard=%d shard_requests=%s", sh.CrossShardRequests, byShard(sh.RequestsByShard))
	}
	if p := st.Process; p != nil {
		s += fmt.Sprintf(" pid=%d started=%s", p.PID, p.StartedAt.UTC().Format(time.RFC3339))
		if p.SchedPolicy != "" {
			s += " sched=" + p.SchedPolicy
		}
		if b := p.Build; b.Version != "" {
			s += " version=" + b.Version
			if r := buildinfo.Info(b).ShortRevision(); r != "" {
				s += " revision=" + r
			}
			s += " go=" + b.GoVersion
		}
		if pr := p.Predecessor; pr != nil {
			s += fmt.Sprintf(" predecessor=%d (started %s)", pr.PID, pr.StartedAt.UTC().Format(time.RFC3339))
		}
		if h := p.Handover; h != nil {
			s += fmt.Sprintf(" handover_received=%d handover_closed=%d", h.Received, h.ClosedByPredecessor)
			if !h.Done {
				s += " (handover not done)"
			}
		}
	}
	return s, nil
}

// result is one host's row.
type result struct {
	host   string
	err    error
	detail string
}

// apply runs o on every host in parallel and returns the results in the hosts' order.
func apply(ctx context.Context, c *client, hosts []string, o op) []result {
	out := make([]result, len(hosts))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Go(func() {
			out[i] = result{host: strings.TrimPrefix(h, "http://")}
			out[i].detail, out[i].err = c.do(ctx, h, o)
		})
	}
	wg.Wait()
	return out
}

// do runs o on the host at base.
func (c *client) do(ctx context.Context, base string, o op) (string, error) {
	if o.post != "" {
		if _, err := c.request(ctx, http.MethodPost, base+o.post, o.params); err != nil {
			return "", err
		}
	}
	if o.del != "" {
		if _, err := c.request(ctx, http.MethodDelete, base+o.del, nil); err != nil {
			return "", err
		}
	}
	body, err := c.request(ctx, http.MethodGet, base+o.get, nil)
	if err != nil {
		if o.post != "" {
			return "", fmt.Errorf("applied, but reading it back failed: %w", err)
		}
		return "", err
	}
	detail, err := o.show(body)
	if d := o.params.Get("for"); o.post != "" && d != "" && err == nil {
		detail += " (reverts in " + d + ")"
	}
	return detail, err
}

// printTable writes one row per host and reports whether every host succeeded.
func printTable(w io.Writer, results []result) bool {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tRESULT\tDETAIL")
	ok := true
	for _, r := range results {
		res, detail := "ok", r.detail
		if r.err != nil {
			res, detail, ok = "error", r.err.Error(), false
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.host, res, strings.ReplaceAll(detail, "\n", " "))
	}
	tw.Flush()
	return ok
}

// byShard formats requests by shard as 0:n,1:n,… in shard order.
func byShard(m map[string]uint64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, _ := strconv.Atoi(keys[i])
		b, _ := strconv.Atoi(keys[j])
		return a < b
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + ":" + strconv.FormatUint(m[k], 10)
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}
