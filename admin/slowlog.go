package admin

import (
	"cmp"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/statements"
)

// Limits of /tracecar/slow_log.
const (
	DefaultSlowLogLimit = 100
	MaxSlowLogLimit     = 100000
)

// The headers of a /tracecar/slow_log answer: how many records matched the filters, and
// whether the limit cut them. The body stays the JSON array of sessions that ScyllaDB-style
// scripts read.
const (
	HeaderMatched   = "X-Tracecar-Matched"
	HeaderTruncated = "X-Tracecar-Truncated"
)

// SlowLogParams are the parameters of GET /tracecar/slow_log.
var SlowLogParams = []string{"limit", "min_duration", "keyspace", "table", "user", "client", "since", "until",
	"trace_id", "sort", "include_system"}

// SlowLogQuery is a query of the slow log: which sessions, in which order, how many. The
// zero value matches every session, newest first, the default limit.
type SlowLogQuery struct {
	Limit         int
	MinDuration   time.Duration
	Keyspace      string
	Table         string // a table name, or keyspace.table
	User          string
	Client        netip.Prefix // a single address is a /32 or /128
	Since, Until  time.Time
	TraceID       string
	ByDuration    bool // slowest first, rather than newest first
	ExcludeSystem bool // hide queries of the node's own keyspaces (statements.IsSystemKeyspace)
}

// parseSlowLogQuery reads and checks every parameter before any is used: an unknown or
// repeated one is a 400 that names it.
func parseSlowLogQuery(ctx *fasthttp.RequestCtx) (SlowLogQuery, error) {
	q := SlowLogQuery{Limit: DefaultSlowLogLimit}
	p, err := readParams(ctx, SlowLogParams...)
	if err != nil {
		return q, err
	}
	if n, ok, err := p.integer("limit", 1, MaxSlowLogLimit, "an integer from 1 to "+strconv.Itoa(MaxSlowLogLimit)); err != nil {
		return q, err
	} else if ok {
		q.Limit = int(n)
	}
	if s, ok := p["min_duration"]; ok {
		if q.MinDuration, err = durationParam("min_duration", s); err != nil {
			return q, err
		}
	}
	q.Keyspace, q.Table, q.User = p["keyspace"], p["table"], p["user"]
	if s, ok := p["client"]; ok {
		if q.Client, err = clientParam(s); err != nil {
			return q, err
		}
	}
	for _, b := range []struct {
		name string
		t    *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		if s, ok := p[b.name]; ok {
			if *b.t, err = time.Parse(time.RFC3339Nano, s); err != nil {
				return q, badParam(b.name, s, "an RFC 3339 time, such as 2026-12-06T15:04:05Z")
			}
		}
	}
	if s, ok := p["trace_id"]; ok {
		if q.TraceID, err = traceIDParam([]byte(s)); err != nil {
			return q, err
		}
	}
	switch s := p["sort"]; s {
	case "", "time":
	case "duration":
		q.ByDuration = true
	default:
		return q, badParam("sort", s, "time (newest first) or duration (slowest first)")
	}
	incl, ok, err := p.boolean("include_system")
	if err != nil {
		return q, err
	}
	q.ExcludeSystem = ok && !incl
	return q, nil
}

// durationParam reads a duration: a number of microseconds, as the slow-query threshold
// is given, or a Go duration such as 100ms.
func durationParam(name, s string) (time.Duration, error) {
	want := "microseconds (such as 100000) or a duration with its unit (such as 100ms)"
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return 0, badParam(name, s, want)
		}
		return time.Duration(n) * time.Microsecond, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, badParam(name, s, want)
	}
	return d, nil
}

// clientParam reads a client address or CIDR.
func clientParam(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	return netip.Prefix{}, badParam("client", s, "an IP address or a CIDR, such as 10.0.0.7 or 10.0.0.0/8")
}

// Match reports whether the session s passes q's filters.
func (q *SlowLogQuery) Match(s *tracing.Session) bool {
	if time.Duration(s.DurationUS)*time.Microsecond < q.MinDuration {
		return false
	}
	if q.User != "" && s.Username != q.User || q.TraceID != "" && s.TraceID != q.TraceID {
		return false
	}
	if !q.Since.IsZero() && s.StartedAt.Before(q.Since) || !q.Until.IsZero() && s.StartedAt.After(q.Until) {
		return false
	}
	if q.Client.IsValid() {
		ap, err := netip.ParseAddrPort(s.Client)
		if err != nil || !q.Client.Contains(ap.Addr().Unmap()) {
			return false
		}
	}
	if q.Keyspace == "" && q.Table == "" && !q.ExcludeSystem {
		return true
	}
	ks, table := s.Target()
	if q.ExcludeSystem && statements.IsSystemKeyspace(ks) {
		return false
	}
	if q.Keyspace != "" && ks != q.Keyspace {
		return false
	}
	if q.Table != "" {
		if k, t, ok := strings.Cut(q.Table, "."); ok {
			return ks == k && table == t
		}
		return table == q.Table
	}
	return true
}

// Select returns the sessions of all (newest first) that match q, in q's order, up to its
// limit, and how many matched.
func (q *SlowLogQuery) Select(all []tracing.Session) (out []tracing.Session, matched int) {
	out = []tracing.Session{}
	for i := range all {
		if q.Match(&all[i]) {
			matched++
			if q.ByDuration || len(out) < q.Limit {
				out = append(out, all[i])
			}
		}
	}
	if q.ByDuration {
		slices.SortStableFunc(out, func(a, b tracing.Session) int { return cmp.Compare(b.DurationUS, a.DurationUS) })
	}
	return out[:min(len(out), q.Limit)], matched
}

// getSlowLog serves GET /tracecar/slow_log: the recorded sessions that pass the filters,
// newest or slowest first, up to the limit; the headers say how many matched and whether
// the limit cut them.
func (s *tracingAPI) getSlowLog(ctx *fasthttp.RequestCtx, _ string) error {
	q, err := parseSlowLogQuery(ctx)
	if err != nil {
		return err
	}
	out, matched := q.Select(s.tr.SlowLog(0))
	ctx.Response.Header.Set(HeaderMatched, strconv.Itoa(matched))
	ctx.Response.Header.Set(HeaderTruncated, strconv.FormatBool(matched > len(out)))
	return writeJSON(ctx, sessionsOf(out))
}
