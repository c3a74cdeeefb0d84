package ctl

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/tracecar/tracecar/admin/adminapi"
)

// The slow-log commands.
const (
	SlowLog = "slow-log" // the recorded sessions of every host, merged (see slowlog.go)
	Trace   = "trace"    // one session and its events, as cqlsh's TRACING ON prints them
)

// DefaultSlowLogLimit is how many sessions slow-log shows without --limit.
const DefaultSlowLogLimit = 20

// hostSession is a session and the host that recorded it.
type hostSession struct {
	host string
	adminapi.Session
}

// runSlowLog reads the slow log of every host with the filters of cmd.Query, merges the
// sessions, newest or slowest first (cmd.Sort "time" or "duration"), and prints one line
// per session, cut to cmd.Limit. The filtering is the hosts': each host sends its own
// first cmd.Limit, which is all that the merge can show. A host that fails is reported,
// the others are still shown, and ErrHostFailed is returned.
func runSlowLog(ctx context.Context, cfg Config, stdout io.Writer) error {
	cmd := cfg.Command
	cl, err := newClient(cfg.Token, cfg.CACert)
	if err != nil {
		return err
	}
	q := url.Values{}
	for k, v := range cmd.Query {
		q[k] = v
	}
	q.Set("limit", strconv.Itoa(cmd.Limit))
	if cmd.Sort != "" {
		q.Set("sort", cmd.Sort)
	}
	if !cmd.IncludeSystem {
		q.Set("include_system", "false")
	}
	lists := make([][]adminapi.Session, len(cfg.Hosts))
	errs := make([]error, len(cfg.Hosts))
	var wg sync.WaitGroup
	for i, h := range cfg.Hosts {
		wg.Go(func() {
			b, err := cl.request(ctx, http.MethodGet, h+adminapi.PathSlowLog+"?"+q.Encode(), nil)
			if err == nil {
				err = json.Unmarshal(b, &lists[i])
			}
			errs[i] = err
		})
	}
	wg.Wait()
	var failed error
	var all []hostSession
	for i, err := range errs {
		host := strings.TrimPrefix(cfg.Hosts[i], "http://")
		if err != nil {
			failed = ErrHostFailed
			fmt.Fprintf(stdout, "%s: error: %v\n", host, err)
			continue
		}
		for _, s := range lists[i] {
			all = append(all, hostSession{host, s})
		}
	}
	slices.SortStableFunc(all, func(a, b hostSession) int {
		if cmd.Sort == "duration" {
			return cmp.Compare(b.DurationUS, a.DurationUS)
		}
		return b.StartedAt.Compare(a.StartedAt)
	})
	all = all[:min(len(all), cmd.Limit)]
	if cmd.JSON {
		out := make([]adminapi.Session, len(all))
		for i, s := range all {
			out[i] = s.Session
		}
		b, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s\n", b)
		return failed
	}
	printSlowLog(stdout, all, len(cfg.Hosts))
	return failed
}

// maxShownQuery bounds the query text of a slow-log line.
const maxShownQuery = 100

func printSlowLog(w io.Writer, sessions []hostSession, hosts int) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STARTED\tDURATION_US\tHOST\tMODE\tCOMMAND\tCLIENT\tUSER\tSESSION\tQUERY")
	for _, s := range sessions {
		text := sessionQuery(&s.Session)
		if len(text) > maxShownQuery {
			text = text[:maxShownQuery] + "…"
		}
		user := cmp.Or(s.Username, "-")
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.StartedAt.UTC().Format("2006-01-02T15:04:05.000000Z"),
			s.DurationUS, s.host, s.Mode, s.Command, s.Client, user, s.ID, text)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d sessions from %d hosts\n", len(sessions), hosts)
}

// sessionQuery is the statement a session ran, as its record shows it: the query, a
// batch's queries, or a prepared statement's id when its text is unknown.
func sessionQuery(s *adminapi.Session) string {
	p := s.Parameters
	if q := cmp.Or(p["query"], p["prepared_id"]); q != "" {
		return q
	}
	var parts []string
	for i := 0; ; i++ {
		q := cmp.Or(p["query["+strconv.Itoa(i)+"]"], p["prepared_id["+strconv.Itoa(i)+"]"])
		if q == "" {
			break
		}
		parts = append(parts, q)
	}
	if len(parts) > 0 {
		return "BATCH " + p["batch_type"] + ": " + strings.Join(parts, "; ")
	}
	return s.Request
}

// ErrNoSession is returned by trace when no host has the session.
var ErrNoSession = errors.New("ctl: no host has the session")

// runTrace prints the session cmd.Session from the first host that has it, as cqlsh
// prints a trace: the request, then each event (the sidecar's, and the node's when they
// were merged) with its timestamp, source and elapsed microseconds.
func runTrace(ctx context.Context, cfg Config, stdout io.Writer) error {
	cl, err := newClient(cfg.Token, cfg.CACert)
	if err != nil {
		return err
	}
	var failed error
	for _, h := range cfg.Hosts {
		b, err := cl.request(ctx, http.MethodGet, h+adminapi.PathSessions+url.PathEscape(cfg.Command.Session), nil)
		var e *adminapi.Error
		switch {
		case errors.As(err, &e) && e.Status == http.StatusNotFound:
			continue
		case err != nil:
			failed = ErrHostFailed
			fmt.Fprintf(stdout, "%s: error: %v\n", strings.TrimPrefix(h, "http://"), err)
			continue
		}
		var s adminapi.Session
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("ctl: bad session from %s: %w", h, err)
		}
		printTrace(stdout, &s)
		return nil
	}
	if failed != nil {
		return failed
	}
	return fmt.Errorf("%w %s: it was never recorded, or has left the hosts' rings", ErrNoSession, cfg.Command.Session)
}

// printTrace writes s as cqlsh writes a trace.
func printTrace(w io.Writer, s *adminapi.Session) {
	fmt.Fprintf(w, "Tracing session: %s\n\n", s.ID)
	if q := sessionQuery(s); q != "" {
		fmt.Fprintf(w, " %s (%s, %s mode)\n\n", q, s.Command, s.Mode)
	}
	client := s.Client
	if i := strings.LastIndexByte(client, ':'); i > 0 {
		client = strings.Trim(client[:i], "[]")
	}
	rows := [][4]string{{s.Request, ts(s.StartedAt), s.Coordinator, "0"}}
	events := slices.Clone(s.Events)
	at := func(e adminapi.Event) time.Time {
		if !e.Time.IsZero() {
			return e.Time
		}
		return s.StartedAt.Add(time.Duration(e.SourceElapsedUS) * time.Microsecond)
	}
	slices.SortStableFunc(events, func(a, b adminapi.Event) int { return at(a).Compare(at(b)) })
	for _, e := range events {
		rows = append(rows, [4]string{e.Activity, ts(at(e)), e.Source, strconv.FormatInt(e.SourceElapsedUS, 10)})
	}
	rows = append(rows, [4]string{"Request complete", ts(s.StartedAt.Add(time.Duration(s.DurationUS) * time.Microsecond)), s.Coordinator,
		strconv.FormatInt(s.DurationUS, 10)})
	width := [4]int{len("activity"), len("timestamp"), len("source"), len("source_elapsed")}
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], len(c))
		}
	}
	line := func(r [4]string, cl string) {
		fmt.Fprintf(w, " %*s | %-*s | %-*s | %*s | %s\n", width[0], r[0], width[1], r[1], width[2], r[2], width[3], r[3], cl)
	}
	line([4]string{"activity", "timestamp", "source", "source_elapsed"}, "client")
	fmt.Fprintf(w, "-%s-+-%s-+-%s-+-%s-+-%s\n", strings.Repeat("-", width[0]), strings.Repeat("-", width[1]),
		strings.Repeat("-", width[2]), strings.Repeat("-", width[3]), strings.Repeat("-", len(client)))
	for _, r := range rows {
		line(r, client)
	}
	if s.Error != "" {
		fmt.Fprintf(w, "\nerror: %s\n", s.Error)
	}
}

// ts is a trace's timestamp, as cqlsh prints it.
func ts(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000000") }
