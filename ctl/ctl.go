// Package ctl is "tracecar ctl", a nodetool-style client of the admin API that applies one
// change to many sidecars at once.
//
//	tracecar ctl [--hosts h1:10000,h2:10000] [--token T] slow-query [--enable|--disable] [--fast|--full]
//	             [--threshold 500ms] [--ttl 24h]
//	tracecar ctl [--hosts …] trace-probability [P]
//	tracecar ctl [--hosts …] logger [NAME [LEVEL]]
//	tracecar ctl [--hosts …] status
//
// Every host gets the request in parallel; a host that fails does not stop the others. A
// change is read back from each host after it is applied, so the table shows what each host
// now has. Without a change (slow-query with no flags, trace-probability with no P, logger
// with no LEVEL) the command only reads.
package ctl

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// Exit codes of Run.
const (
	ExitOK     = 0
	ExitFailed = 1 // a host failed
	ExitUsage  = 2 // the command line is wrong
)

// DefaultPort is added to a host given without one.
const DefaultPort = "10000"

// Timeout bounds each HTTP request to a host.
const Timeout = 5 * time.Second

// levels are the log levels the admin API accepts.
var levels = []string{"error", "warn", "info", "debug", "trace"}

// usageError is a command-line error; Run prints it with the usage and exits 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

const usage = `usage: tracecar ctl [--hosts h1:10000,h2:10000] [--token T] [--cacert FILE] COMMAND
commands:
  slow-query [--enable|--disable] [--fast|--full] [--threshold 500ms] [--ttl 24h]
                           set slow-query logging; with no flags, show it
  trace-probability [P]    set the share of requests traced fully, P in [0,1]; without P, show it
  logger [NAME [LEVEL]]    set logger NAME to LEVEL (error, warn, info, debug, trace);
                           without LEVEL show NAME's level, without NAME show every level
  status                   show mode, counters, sink drops and guardrail state
  statements [--sort total_time|calls|p99|errors] [--limit 20] [--json]
                           per-statement statistics of every host, merged by statement
  trace-filter [--keyspace K] [--table T] [--user U] [--client CIDR] [--statement S] [--opcode OP] [--clear]
                           trace only matching requests (flags ANDed); --clear removes the filter;
                           with no flags, show it
--hosts defaults to 127.0.0.1:10000; a host without a port gets :10000, and may be an
http:// or https:// URL. --token defaults to $TRACECAR_ADMIN_TOKEN.
exit codes: 0 all hosts ok, 1 a host failed, 2 usage error
`

// common are the flags every command takes, before or after the command name.
type common struct {
	hosts, token, cacert string
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.hosts, "hosts", c.hosts, "comma-separated admin API addresses")
	fs.StringVar(&c.token, "token", c.token, "bearer token of the admin API")
	fs.StringVar(&c.cacert, "cacert", c.cacert, "PEM file of the CA that signed the API's certificate")
}

// Run runs the ctl command line args (the words after "ctl"), writing the result table to
// stdout and errors to stderr, and returns the exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	code, err := run(ctx, args, stdout)
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "tracecar ctl: %v\n\n%s", err, usage)
		return ExitUsage
	}
	if err != nil {
		fmt.Fprintf(stderr, "tracecar ctl: %v\n", err)
		return ExitFailed
	}
	return code
}

// usageErr returns a usage error with message.
func usageErr(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported once, by Run
	return fs
}

// parseFlags parses fs, turning its errors into usage errors.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return usageErr("help requested")
		}
		return usageErr("%s: %v", fs.Name(), err)
	}
	return nil
}

func run(ctx context.Context, args []string, stdout io.Writer) (int, error) {
	c := common{hosts: "127.0.0.1:" + DefaultPort, token: os.Getenv("TRACECAR_ADMIN_TOKEN")}
	fs := newFlagSet("ctl")
	c.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return 0, err
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return 0, usageErr("no command")
	}
	var build func([]string) (op, error)
	switch rest[0] {
	case "slow-query":
		build = func(a []string) (op, error) { return slowQuery(&c, a) }
	case "trace-probability":
		build = func(a []string) (op, error) { return traceProbability(&c, a) }
	case "logger":
		build = func(a []string) (op, error) { return logger(&c, a) }
	case "status":
		build = func(a []string) (op, error) { return status(&c, a) }
	case "statements":
		return statementsCmd(ctx, &c, rest[1:], stdout)
	case "trace-filter":
		build = func(a []string) (op, error) { return traceFilter(&c, a) }
	default:
		return 0, usageErr("unknown command %q: want slow-query, trace-probability, logger, status, statements or trace-filter", rest[0])
	}
	o, err := build(rest[1:])
	if err != nil {
		return 0, err
	}
	hosts, err := parseHosts(c.hosts)
	if err != nil {
		return 0, err
	}
	cl, err := newClient(c.token, c.cacert)
	if err != nil {
		return 0, err
	}
	results := apply(ctx, cl, hosts, o)
	return printTable(stdout, results), nil
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

func slowQuery(c *common, args []string) (op, error) {
	fs := newFlagSet("slow-query")
	c.register(fs)
	enable := fs.Bool("enable", false, "turn slow-query logging on")
	disable := fs.Bool("disable", false, "turn slow-query logging off")
	fast := fs.Bool("fast", false, "fast mode: sessions without events")
	full := fs.Bool("full", false, "full mode: sessions with events")
	threshold := fs.String("threshold", "", "latency above which a query is slow, such as 500ms")
	ttl := fs.String("ttl", "", "time to live of recorded sessions, such as 24h")
	if err := parseFlags(fs, args); err != nil {
		return op{}, err
	}
	if fs.NArg() > 0 {
		return op{}, usageErr("slow-query takes only flags, got %q", fs.Args())
	}
	p := url.Values{}
	switch {
	case *enable && *disable:
		return op{}, usageErr("slow-query: --enable and --disable contradict each other")
	case *enable:
		p.Set("enable", "true")
	case *disable:
		p.Set("enable", "false")
	}
	switch {
	case *fast && *full:
		return op{}, usageErr("slow-query: --fast and --full contradict each other")
	case *fast:
		p.Set("fast", "true")
	case *full:
		p.Set("fast", "false")
	}
	if *threshold != "" {
		d, err := time.ParseDuration(*threshold)
		if err != nil || d < 0 || d%time.Microsecond != 0 {
			return op{}, usageErr("slow-query: --threshold %q: want a duration of whole microseconds, 0 or more, such as 500ms", *threshold)
		}
		p.Set("threshold", strconv.FormatInt(d.Microseconds(), 10))
	}
	if *ttl != "" {
		d, err := time.ParseDuration(*ttl)
		if err != nil || d < 0 || d%time.Second != 0 || d/time.Second > 630720000 {
			return op{}, usageErr("slow-query: --ttl %q: want a duration of whole seconds from 0 to 175200h (20 years), such as 24h", *ttl)
		}
		p.Set("ttl", strconv.FormatInt(int64(d/time.Second), 10))
	}
	o := op{get: "/storage_service/slow_query", show: showSlowQuery}
	if len(p) > 0 {
		o.post, o.params = "/storage_service/slow_query", p
	}
	return o, nil
}

func showSlowQuery(body []byte) (string, error) {
	var sq struct {
		Enable    bool  `json:"enable"`
		TTL       int64 `json:"ttl"`
		Threshold int64 `json:"threshold"`
		Fast      bool  `json:"fast"`
	}
	if err := json.Unmarshal(body, &sq); err != nil {
		return "", fmt.Errorf("bad slow_query response %q: %w", body, err)
	}
	return fmt.Sprintf("enable=%v fast=%v threshold=%v ttl=%v", sq.Enable, sq.Fast,
		time.Duration(sq.Threshold)*time.Microsecond, time.Duration(sq.TTL)*time.Second), nil
}

func traceProbability(c *common, args []string) (op, error) {
	fs := newFlagSet("trace-probability")
	c.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return op{}, err
	}
	o := op{get: "/storage_service/trace_probability", show: func(body []byte) (string, error) {
		var p float64
		if err := json.Unmarshal(body, &p); err != nil {
			return "", fmt.Errorf("bad trace_probability response %q: %w", body, err)
		}
		return "probability=" + strconv.FormatFloat(p, 'g', -1, 64), nil
	}}
	switch fs.NArg() {
	case 0:
		return o, nil
	case 1:
	default:
		return op{}, usageErr("trace-probability takes one number, got %q", fs.Args())
	}
	s := fs.Arg(0)
	p, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(p) || p < 0 || p > 1 {
		return op{}, usageErr("trace-probability %q: want a number from 0 to 1, such as 0.01", s)
	}
	o.post, o.params = "/storage_service/trace_probability", url.Values{"probability": {s}}
	return o, nil
}

func logger(c *common, args []string) (op, error) {
	fs := newFlagSet("logger")
	c.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return op{}, err
	}
	switch fs.NArg() {
	case 0:
		return op{get: "/storage_service/logging_level", show: showLevels}, nil
	case 1, 2:
	default:
		return op{}, usageErr("logger takes NAME and LEVEL, got %q", fs.Args())
	}
	name := fs.Arg(0)
	if name == "" || strings.ContainsAny(name, "/?#") {
		return op{}, usageErr("logger name %q is not a logger name", name)
	}
	path := "/system/logger/" + url.PathEscape(name)
	o := op{get: path, show: func(body []byte) (string, error) {
		var l string
		if err := json.Unmarshal(body, &l); err != nil {
			return "", fmt.Errorf("bad logger response %q: %w", body, err)
		}
		return name + "=" + l, nil
	}}
	if fs.NArg() == 2 {
		level := strings.ToLower(fs.Arg(1))
		if !contains(levels, level) {
			return op{}, usageErr("logger level %q: want one of %s", fs.Arg(1), strings.Join(levels, ", "))
		}
		o.post, o.params = path, url.Values{"level": {level}}
	}
	return o, nil
}

func showLevels(body []byte) (string, error) {
	var kv []struct{ Key, Value string }
	if err := json.Unmarshal(body, &kv); err != nil {
		return "", fmt.Errorf("bad logging_level response %q: %w", body, err)
	}
	parts := make([]string, len(kv))
	for i, e := range kv {
		parts[i] = e.Key + "=" + e.Value
	}
	return strings.Join(parts, " "), nil
}

func status(c *common, args []string) (op, error) {
	fs := newFlagSet("status")
	c.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return op{}, err
	}
	if fs.NArg() > 0 {
		return op{}, usageErr("status takes no arguments, got %q", fs.Args())
	}
	return op{get: "/tracecar/status", show: showStatus}, nil
}

func showStatus(body []byte) (string, error) {
	var st struct {
		Mode     string `json:"mode"`
		Counters struct {
			Requests     uint64 `json:"requests"`
			Traced       uint64 `json:"traced"`
			SlowSessions uint64 `json:"slow_sessions"`
		} `json:"counters"`
		SinkDropped map[string]uint64 `json:"sink_dropped"`
		Guardrail   struct {
			State  string `json:"state"`
			Detail string `json:"detail"`
		} `json:"guardrail"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return "", fmt.Errorf("bad status response %q: %w", body, err)
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
	return s, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
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
			return nil, usageErr("--hosts: %q is not host:port or an http(s) URL", h)
		}
		if u.Port() == "" {
			u.Host += ":" + DefaultPort
		}
		out = append(out, u.Scheme+"://"+u.Host)
	}
	if len(out) == 0 {
		return nil, usageErr("--hosts is empty")
	}
	return out, nil
}

// client is an HTTP client with the token.
type client struct {
	http  *http.Client
	token string
}

func newClient(token, cacert string) (*client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cacert != "" {
		pem, err := os.ReadFile(cacert)
		if err != nil {
			return nil, fmt.Errorf("read --cacert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--cacert %s holds no PEM certificate", cacert)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &client{http: &http.Client{Timeout: Timeout, Transport: tr}, token: token}, nil
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
	return o.show(body)
}

// request sends one request, with params form-encoded in the body, and returns the body of
// a 2xx response; any other status is an error with the API's message.
func (c *client) request(ctx context.Context, method, u string, params url.Values) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	var body io.Reader
	if params != nil {
		body = strings.NewReader(params.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if params != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s: read body: %w", method, u, err)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(b, &e) == nil && e.Message != "" {
			return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, e.Message)
		}
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return b, nil
}

// printTable writes one row per host and returns ExitFailed if any host failed.
func printTable(w io.Writer, results []result) int {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tRESULT\tDETAIL")
	code := ExitOK
	for _, r := range results {
		res, detail := "ok", r.detail
		if r.err != nil {
			res, detail, code = "error", r.err.Error(), ExitFailed
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.host, res, strings.ReplaceAll(detail, "\n", " "))
	}
	tw.Flush()
	return code
}
