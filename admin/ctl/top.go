package ctl

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tracecar/tracecar/admin/adminapi"
)

// tracecar ctl top: what the sidecars do now, refreshed in place, as pg_top and
// nodetool toppartitions show it. Every interval each host is read once (status,
// statements with their histograms, requests in flight, /metrics), and what is shown is
// the difference from the previous reading: rates, and percentiles from the merged
// histograms of that interval, never averaged across hosts.
//
// This file reads and computes; top_render.go lays the result out as lines, for the
// screen (top_screen.go) or as plain lines when stdout is not a terminal, and top_run.go
// runs the command, choosing one.

// DefaultTopInterval is the refresh interval of top without --interval.
const DefaultTopInterval = 2 * time.Second

// topOps are the opcodes top counts as operations: those statement statistics count as
// calls, so that the two agree.
var topOps = []string{"QUERY", "EXECUTE", "BATCH"}

// topInFlight is how many requests in flight each host is asked for.
const topInFlight = 20

// hostSample is one reading of one host. Its request counters and its statements are
// read one right after the other, and each with its own time (at, stmtAt), so that their
// rates agree even when a host is slow to answer one reading.
type hostSample struct {
	at      time.Time // of the /metrics read
	stmtAt  time.Time // of the statements read
	err     error
	status  adminapi.Status
	statsOn bool
	stmts   map[stmtKey]adminapi.Statement
	queries []adminapi.Query
	ops     uint64             // requests of topOps
	latency adminapi.Histogram // their latency, summed over topOps
}

type stmtKey struct {
	text     string
	prepared bool
}

// sample reads one host. The request counters (/metrics) and the statements are read at
// once, in parallel, so that their differences over an interval cover the same time even
// while the load changes (as when drivers start) and the host is slow to answer.
func (c *client) sample(ctx context.Context, base string) hostSample {
	var s hostSample
	max, on, err := c.statementStats(ctx, base)
	if err != nil {
		s.err = err
		return s
	}
	s.statsOn = on
	var metrics, list []byte
	var lerr error
	var wg sync.WaitGroup
	wg.Go(func() {
		start := time.Now()
		metrics, err = c.request(ctx, http.MethodGet, base+adminapi.PathMetrics, nil)
		s.at = midpoint(start, time.Now())
	})
	if max > 0 {
		wg.Go(func() {
			start := time.Now()
			list, lerr = c.request(ctx, http.MethodGet, base+adminapi.PathStatements+"?sort=calls&histogram=true&limit="+strconv.Itoa(max), nil)
			s.stmtAt = midpoint(start, time.Now())
		})
	}
	wg.Wait()
	if s.err = cmp.Or(err, lerr); s.err != nil {
		return s
	}
	rm, err := adminapi.ParseRequestMetrics(metrics)
	if err != nil {
		s.err = err
		return s
	}
	for _, op := range topOps {
		s.ops += rm.Requests[op]
		s.latency = s.latency.Add(rm.Latency[op])
	}
	s.stmts = map[stmtKey]adminapi.Statement{}
	if list != nil {
		var sts []adminapi.Statement
		if err := json.Unmarshal(list, &sts); err != nil {
			s.err = fmt.Errorf("bad statements response: %w", err)
			return s
		}
		for _, st := range sts {
			s.stmts[stmtKey{st.Statement, st.Prepared}] = st
		}
	}
	get := func(path string) []byte {
		if s.err != nil {
			return nil
		}
		var b []byte
		b, s.err = c.request(ctx, http.MethodGet, base+path, nil)
		return b
	}
	if b := get(adminapi.PathStatus); b != nil {
		s.status, s.err = adminapi.ParseStatus(b)
	}
	if b := get(adminapi.PathQueries + "?limit=" + strconv.Itoa(topInFlight)); b != nil {
		s.queries, s.err = adminapi.ParseQueries(b)
	}
	return s
}

// statementStats reads how many statements a host's statistics may hold (0: the host
// has none) and whether they are on.
func (c *client) statementStats(ctx context.Context, base string) (max int, on bool, err error) {
	b, err := c.request(ctx, http.MethodGet, base+adminapi.PathStatementStats, nil)
	if err != nil {
		if e, ok := err.(*adminapi.Error); ok && e.Status == http.StatusNotFound {
			return 0, false, nil
		}
		return 0, false, err
	}
	var st struct {
		Enabled bool `json:"enabled"`
		Max     int  `json:"max"`
	}
	if err := json.Unmarshal(b, &st); err != nil || st.Max < 1 {
		return 0, false, fmt.Errorf("bad statement_stats response %q", b)
	}
	return st.Max, st.Enabled, nil
}

// midpoint is the middle of a request: the best guess of when the host took its counts.
func midpoint(a, b time.Time) time.Time { return a.Add(b.Sub(a) / 2) }

// sampleAll reads every host in parallel.
func (c *client) sampleAll(ctx context.Context, hosts []string) []hostSample {
	out := make([]hostSample, len(hosts))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Go(func() { out[i] = c.sample(ctx, h) })
	}
	wg.Wait()
	return out
}

// topView is what one refresh shows.
type topView struct {
	at       time.Time
	interval time.Duration // measured between the two readings; 0 on the first
	sort     string
	cluster  hostRow
	hosts    []hostRow
	stmts    []stmtRow // active in the interval, sorted
	calls    float64   // calls/s of every statement, shown or not
	statsOff int       // hosts without statement statistics on
	inflight []inflightRow
}

// hostRow is the header of one host, or of the cluster (the sum of the hosts).
type hostRow struct {
	host        string
	err         error
	up, total   int // hosts that answered, of those asked (cluster)
	opsPerSec   float64
	p50, p99    float64 // seconds; valid with hasLatency
	hasLatency  bool
	mode        string
	probability string
	guardrail   string
	drops       uint64 // sessions dropped by full sink queues, since start
	dropsDelta  uint64 // of those, in the interval
	// cross counts the requests sent to a ScyllaDB shard that does not own their token,
	// since start, of shardReqs requests on connections whose shard is known; hasShards
	// says the sidecar reported shards.
	cross, shardReqs uint64
	hasShards        bool
}

// stmtRow is one statement over the interval.
type stmtRow struct {
	text        string
	prepared    bool
	share       float64 // of the total time of every statement in the interval
	callsPerSec float64
	meanUS      float64
	p99US       uint64
	errorsPer   float64 // errors per second
	anti        []string
	// the interval's sums, for sorting
	totalUS, calls, errors uint64
}

// inflightRow is one request in flight on one host.
type inflightRow struct {
	host string
	q    adminapi.Query
}

// buildView computes what a refresh shows from the previous and current readings of the
// hosts (prev is nil on the first refresh), with statements sorted by order.
func buildView(hosts []string, prev, cur []hostSample, order string) topView {
	v := topView{sort: order, cluster: hostRow{host: "cluster", total: len(hosts)}}
	var iv interval
	modes, probs, guards := map[string]int{}, map[string]int{}, map[string]int{}
	for i, h := range hosts {
		c := cur[i]
		row := hostRow{host: strings.TrimPrefix(h, "http://"), err: c.err}
		v.at = maxTime(v.at, c.at)
		if c.err == nil {
			v.cluster.up++
			row.setStatus(c.status)
			modes[row.mode]++
			probs[row.probability]++
			guards[row.guardrail]++
			if !c.statsOn {
				v.statsOff++
			}
		}
		if c.err == nil && prev != nil && prev[i].err == nil && !prev[i].at.IsZero() {
			iv.add(&row, prev[i], c)
		}
		v.addHost(row, c.queries)
	}
	v.cluster.mode, v.cluster.probability = summary(modes), summary(probs)
	v.cluster.guardrail = summary(guards)
	if v.cluster.up < v.cluster.total {
		v.cluster.err = fmt.Errorf("%d of %d hosts did not answer", v.cluster.total-v.cluster.up, v.cluster.total)
	}
	slices.SortStableFunc(v.inflight, func(a, b inflightRow) int { return cmp.Compare(b.q.ElapsedUS, a.q.ElapsedUS) })
	if len(iv.dts) == 0 {
		return v
	}
	v.interval = mean(iv.dts)
	v.cluster.opsPerSec = perSecond(iv.ops, v.interval)
	v.cluster.p50, v.cluster.hasLatency = iv.lat.Quantile(0.5)
	v.cluster.p99, _ = iv.lat.Quantile(0.99)
	v.addStatements(iv.deltas, mean(iv.stmtDts))
	sortStmtRows(v.stmts, order)
	return v
}

// setStatus fills the row's settings and counters from its host's status: the tracing
// mode, the probability, the guardrail's state, the sinks' drops and the shard figures.
func (row *hostRow) setStatus(st adminapi.Status) {
	row.mode = cmp.Or(st.Mode, "none")
	row.probability = strconv.FormatFloat(st.TraceProbability, 'g', -1, 64)
	row.guardrail = cmp.Or(st.Guardrail.State, "none")
	for _, n := range st.SinkDropped {
		row.drops += n
	}
	if sh := st.Shards; sh != nil {
		row.hasShards, row.cross = true, sh.CrossShardRequests
		for _, n := range sh.RequestsByShard {
			row.shardReqs += n
		}
	}
}

// interval is what the hosts did between two readings: the spans, the cluster's requests
// and latency, and each host's statements' deltas.
type interval struct {
	dts, stmtDts []time.Duration
	lat          adminapi.Histogram
	ops          uint64
	deltas       [][]adminapi.Statement
}

// add adds what a host did from its reading p to c, and sets its row's rates: requests a
// second, latency percentiles and new drops.
func (iv *interval) add(row *hostRow, p, c hostSample) {
	dt := c.at.Sub(p.at)
	iv.dts = append(iv.dts, dt)
	iv.stmtDts = append(iv.stmtDts, cmp.Or(c.stmtAt.Sub(p.stmtAt), dt))
	lat := c.latency.Sub(p.latency)
	ops := uint64(0)
	if c.ops >= p.ops {
		ops = c.ops - p.ops
	}
	iv.ops += ops
	iv.lat = iv.lat.Add(lat)
	row.opsPerSec = perSecond(ops, dt)
	row.p50, row.hasLatency = lat.Quantile(0.5)
	row.p99, _ = lat.Quantile(0.99)
	row.dropsDelta = sub(row.drops, sum(p.status.SinkDropped))
	iv.deltas = append(iv.deltas, stmtDeltas(p.stmts, c.stmts))
}

// addHost adds a host's row to the view, its counters to the cluster's, and its requests
// in flight to the view's.
func (v *topView) addHost(row hostRow, queries []adminapi.Query) {
	v.cluster.drops += row.drops
	v.cluster.dropsDelta += row.dropsDelta
	v.cluster.cross += row.cross
	v.cluster.shardReqs += row.shardReqs
	v.cluster.hasShards = v.cluster.hasShards || row.hasShards
	v.hosts = append(v.hosts, row)
	for _, q := range queries {
		v.inflight = append(v.inflight, inflightRow{host: row.host, q: q})
	}
}

// addStatements merges the hosts' statement deltas over a span of stmtInterval and adds a
// row for each statement called in it: its rates, and its share of the time of all.
func (v *topView) addStatements(deltas [][]adminapi.Statement, stmtInterval time.Duration) {
	merged, _ := adminapi.Merge(deltas...)
	var allUS uint64
	for _, m := range merged {
		allUS += m.TotalTimeUS
	}
	for _, m := range merged {
		if m.Calls == 0 {
			continue
		}
		r := stmtRow{text: m.Statement, prepared: m.Prepared, totalUS: m.TotalTimeUS, calls: m.Calls,
			errors: m.ErrorCount(), callsPerSec: perSecond(m.Calls, stmtInterval), meanUS: m.MeanUS, p99US: m.P99US,
			anti: m.AntiPatterns}
		r.errorsPer = perSecond(r.errors, stmtInterval)
		if allUS > 0 {
			r.share = float64(m.TotalTimeUS) / float64(allUS)
		}
		v.calls += r.callsPerSec
		v.stmts = append(v.stmts, r)
	}
}

// stmtDeltas returns what each statement of cur did since prev: counts, time, errors and
// histogram buckets. A statement that is new, or whose counts went back (statistics were
// reset, or it was evicted and came back), counts from zero.
func stmtDeltas(prev, cur map[stmtKey]adminapi.Statement) []adminapi.Statement {
	out := make([]adminapi.Statement, 0, len(cur))
	for k, c := range cur {
		p, ok := prev[k]
		if !ok || c.Calls < p.Calls || c.TotalTimeUS < p.TotalTimeUS {
			out = append(out, c)
			continue
		}
		d := c
		d.Calls, d.TotalTimeUS, d.Rows = c.Calls-p.Calls, c.TotalTimeUS-p.TotalTimeUS, sub(c.Rows, p.Rows)
		d.Errors = map[string]uint64{}
		for name, n := range c.Errors {
			if n > p.Errors[name] {
				d.Errors[name] = n - p.Errors[name]
			}
		}
		was := map[uint64]uint64{}
		for _, b := range p.Histogram {
			was[b[0]] = b[1]
		}
		d.Histogram = nil
		for _, b := range c.Histogram {
			if n := b[1] - min(was[b[0]], b[1]); n > 0 {
				d.Histogram = append(d.Histogram, adminapi.Bucket{b[0], n})
			}
		}
		out = append(out, d)
	}
	// The merge keeps the order it meets statements in; make it the same on every run.
	slices.SortFunc(out, func(a, b adminapi.Statement) int {
		return cmp.Or(strings.Compare(a.Statement, b.Statement), boolCompare(a.Prepared, b.Prepared))
	})
	return out
}

// TopSortOrders are the orders of top's statements, as --sort and the keys name them.
var TopSortOrders = adminapi.SortOrders

// sortStmtRows sorts by order (one of TopSortOrders), most first, ties by text.
func sortStmtRows(rows []stmtRow, order string) {
	val := func(r *stmtRow) uint64 {
		switch order {
		case "calls":
			return r.calls
		case "p99":
			return r.p99US
		case "errors":
			return r.errors
		}
		return r.totalUS
	}
	slices.SortStableFunc(rows, func(a, b stmtRow) int {
		return cmp.Or(cmp.Compare(val(&b), val(&a)), strings.Compare(a.text, b.text), boolCompare(b.prepared, a.prepared))
	})
}

func boolCompare(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

func mean(ds []time.Duration) time.Duration {
	var total time.Duration
	for _, d := range ds {
		total += d
	}
	return total / time.Duration(len(ds))
}

func perSecond(n uint64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

func sum(m map[string]uint64) uint64 {
	var n uint64
	for _, v := range m {
		n += v
	}
	return n
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// summary is the one value every host has, or the values with their counts.
func summary(counts map[string]int) string {
	switch len(counts) {
	case 0:
		return "-"
	case 1:
		for k := range counts {
			return k
		}
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		keys[i] = k + "×" + strconv.Itoa(counts[k])
	}
	return strings.Join(keys, " ")
}

// top is one run of the command.
type top struct {
	cl    *client
	hosts []string
	cmd   Command
}

// readings sends a reading of every host at once and then every interval, until ctx is
// done; it closes the channel when it stops.
func (t *top) readings(ctx context.Context) <-chan []hostSample {
	ch := make(chan []hostSample)
	go func() {
		defer close(ch)
		tick := time.NewTicker(t.cmd.Interval)
		defer tick.Stop()
		for {
			s := t.cl.sampleAll(ctx, t.hosts)
			if !t.cmd.IncludeSystem {
				for i := range s {
					maps.DeleteFunc(s[i].stmts, func(_ stmtKey, st adminapi.Statement) bool { return adminapi.IsSystemKeyspace(st.Keyspace) })
					s[i].queries = slices.DeleteFunc(s[i].queries, func(q adminapi.Query) bool { return adminapi.IsSystemKeyspace(q.Keyspace) })
				}
			}
			select {
			case ch <- s:
			case <-ctx.Done():
				return
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}
