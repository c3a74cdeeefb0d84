// Package metrics holds the Prometheus series that tracecar's data path updates per request:
// requests by opcode and their latency. The admin package serves them on /metrics together
// with the series it reads from the tracer when scraped.
//
// The package sits below sidecar and admin so that the sidecar can count requests without
// depending on the admin API (and on fasthttp).
//
// Every connection's goroutines update these series at once, so they are striped: each
// goroutine adds to one of several shards (chosen by its stack address), with plain atomic
// adds on that shard's own cache lines, and a scrape sums the shards.
// Unlike client_golang's Counter and Histogram, which every core would update in the same
// cache lines, this costs the same from one core or from all of them, and never allocates.
package metrics

import (
	"math"
	"math/bits"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/tracecar/tracecar/internal/buildinfo"
	"github.com/tracecar/tracecar/internal/cql"
)

// RequestOpcodes are the client-to-node opcodes that get their own series. Any other opcode
// is counted under the label "other".
var RequestOpcodes = []cql.Opcode{
	cql.OpStartup, cql.OpAuthResponse, cql.OpOptions, cql.OpQuery, cql.OpPrepare,
	cql.OpExecute, cql.OpBatch, cql.OpRegister,
}

// LatencyBuckets are the upper bounds, in seconds, of the request latency histogram: 100 µs
// to 10 s, about three buckets a decade, which covers both a cache hit and a timeout.
var LatencyBuckets = []float64{
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
}

// AddedLatencyBuckets are the upper bounds, in seconds, of tracecar_added_latency_seconds:
// the sidecar's own time is microseconds, so the buckets run from 1 µs to 100 ms, about
// seven a decade, fine enough that a percentile interpolated in a bucket is within a few
// tens of percent of the true one.
var AddedLatencyBuckets = []float64{
	1e-6, 1.5e-6, 2e-6, 3e-6, 5e-6, 7e-6,
	1e-5, 1.5e-5, 2e-5, 3e-5, 5e-5, 7e-5,
	1e-4, 1.5e-4, 2e-4, 3e-4, 5e-4, 7e-4,
	1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 1e-1,
}

const numAddedBuckets = 25 // len(AddedLatencyBuckets)

// addedBoundsNS are AddedLatencyBuckets in nanoseconds.
var addedBoundsNS = func() (b [numAddedBuckets]int64) {
	for i, s := range AddedLatencyBuckets {
		b[i] = int64(math.Round(s * float64(time.Second)))
	}
	return b
}()

const (
	numBuckets = 16 // len(LatencyBuckets)
	numLabels  = 9  // len(RequestOpcodes) + "other"
	maxShards  = 64
)

// boundsNS are LatencyBuckets in nanoseconds, so that Latency compares integers.
var boundsNS = func() (b [numBuckets]int64) {
	for i, s := range LatencyBuckets {
		b[i] = int64(s * float64(time.Second))
	}
	return b
}()

// labels are the opcode label values by label index; labelOf maps an opcode to its index.
var labels, labelOf = func() (names [numLabels]string, idx [256]uint8) {
	for i := range idx {
		idx[i] = numLabels - 1
	}
	for i, op := range RequestOpcodes {
		names[i], idx[op] = op.String(), uint8(i)
	}
	names[numLabels-1] = "other"
	return names, idx
}()

// opCounters are one shard's counts for one opcode label.
type opCounters struct {
	requests atomic.Uint64
	buckets  [numBuckets + 1]atomic.Uint64 // the last one is +Inf
	sumNS    atomic.Uint64
}

// shard is one stripe of every per-request series, padded so that two shards never share
// a cache line.
type shard struct {
	ops        [numLabels]opCounters
	added      [numAddedBuckets + 1]atomic.Uint64 // the last one is +Inf
	addedSumNS atomic.Uint64
	_          [128]byte
}

// Metrics is the set of per-request series. It is safe for concurrent use, and its methods
// on a nil *Metrics do nothing, so a component built without metrics needs no checks.
type Metrics struct {
	shards []shard
	mask   uint32
	conns  atomic.Int64
	limit  atomic.Int64 // the connection limit; 0: none
	reg    *prometheus.Registry
	// requests, when set, gives the request counts by opcode that a component keeps
	// anyway (the sidecar's), added to those counted with Request.
	requests atomic.Pointer[func() map[cql.Opcode]uint64]
	// exemplars are the latest exemplar of each latency bucket, by opcode label: rare (a
	// recorded session that continues a caller's trace), so not striped.
	exemplars [numLabels][numBuckets + 1]atomic.Pointer[prometheus.Exemplar]
}

// New returns Metrics registered in a registry of their own. Every opcode's series exists
// from the start (at zero), so that the first scrape shows them all.
func New() *Metrics {
	n := 1 << bits.Len(uint(4*runtime.GOMAXPROCS(0)-1)) // a power of two ≥ 4 per core
	n = min(n, maxShards)
	m := &Metrics{shards: make([]shard, n), mask: uint32(n - 1), reg: prometheus.NewRegistry()}
	m.reg.MustRegister(collector{m})
	return m
}

// shard returns the calling goroutine's shard. The shard is picked by a hash of the address
// of a local variable, that is of the goroutine's stack: free to compute (a random number
// costs more than the atomic add it spreads), the same for a goroutine's successive calls,
// so its counts stay in its core's cache, and different for goroutines with different
// stacks, so connections spread over the shards. Any shard gives the right sums; the hash
// only decides how rarely two cores write the same cache line.
func (m *Metrics) shard() *shard {
	var local byte
	h := uint32(uintptr(unsafe.Pointer(&local))>>10) * 0x9E3779B1 // Fibonacci hashing
	return &m.shards[(h>>16)&m.mask]
}

// Request counts one request with opcode op.
func (m *Metrics) Request(op cql.Opcode) {
	if m == nil {
		return
	}
	m.shard().ops[labelOf[op]].requests.Add(1)
}

// CountRequests makes tracecar_requests_total read the request counts by opcode from f,
// the counter of a component that keeps one anyway, so that its data path counts each
// request once; they add to the counts of Request. f is called at each scrape and must be
// safe for concurrent use.
func (m *Metrics) CountRequests(f func() map[cql.Opcode]uint64) {
	if m != nil {
		m.requests.Store(&f)
	}
}

// Latency records that a request with opcode op took d, from its arrival until its response
// was sent. It does not count the request: call Request for that.
func (m *Metrics) Latency(op cql.Opcode, d time.Duration) {
	if m == nil {
		return
	}
	m.shard().latency(op, max(int64(d), 0))
}

// latency records a request with opcode op that took ns ≥ 0 nanoseconds.
func (sh *shard) latency(op cql.Opcode, ns int64) {
	c := &sh.ops[labelOf[op]]
	c.buckets[bucketOf(ns, boundsNS[:])].Add(1)
	c.sumNS.Add(uint64(ns))
}

// addedLatency records n responses that each spent ns ≥ 0 nanoseconds in the sidecar.
func (sh *shard) addedLatency(ns int64, n uint64) {
	sh.added[bucketOf(ns, addedBoundsNS[:])].Add(n)
	sh.addedSumNS.Add(n * uint64(ns))
}

// bucketOf returns the index of the histogram bucket of ns among the upper bounds bounds
// (len(bounds): +Inf).
func bucketOf(ns int64, bounds []int64) int {
	i := 0
	for i < len(bounds) && ns > bounds[i] {
		i++
	}
	return i
}

// Answer is a request whose response was sent: its opcode, and when it arrived in
// nanoseconds, on the clock of Answered's now.
type Answer struct {
	Start int64
	Op    cql.Opcode
}

// Answered records requests whose responses arrived together, in one read at arrived, and
// were sent together at now (nanoseconds, on one clock): the latency of each request, as
// Latency, and the added latency of the responses, as AddedLatency, which they share. It
// is what a transport that handles a read's frames as a batch calls once for the batch,
// with one clock read.
func (m *Metrics) Answered(answers []Answer, arrived, now int64) {
	if m == nil || len(answers) == 0 {
		return
	}
	sh := m.shard()
	for _, a := range answers {
		sh.latency(a.Op, max(now-a.Start, 0))
	}
	sh.addedLatency(max(now-arrived, 0), uint64(len(answers)))
}

// ExemplarLabel is the label of a latency exemplar: the W3C trace id it links to.
const ExemplarLabel = "trace_id"

// Exemplar makes traceID the exemplar of the tracecar_request_duration_seconds bucket that
// d falls in, for opcode op: the bucket's latest, served in OpenMetrics so that a scraper
// goes from a latency to the trace of a request that had it. It does not count a request
// (Latency does). It is for requests that were recorded with a trace context, not for
// every request: it allocates.
func (m *Metrics) Exemplar(op cql.Opcode, d time.Duration, traceID string) {
	if m == nil || traceID == "" {
		return
	}
	ns := max(int64(d), 0)
	m.exemplars[labelOf[op]][bucketOf(ns, boundsNS[:])].Store(&prometheus.Exemplar{
		Value: float64(ns) / 1e9, Labels: prometheus.Labels{ExemplarLabel: traceID}, Timestamp: time.Now(),
	})
}

// AddedLatency records d, the time a request spent in the sidecar itself rather than in
// the node or on the network (the sidecar package says which part of it is measured),
// into tracecar_added_latency_seconds.
func (m *Metrics) AddedLatency(d time.Duration) {
	if m == nil {
		return
	}
	m.shard().addedLatency(max(int64(d), 0), 1)
}

// ConnOpened counts a client connection that opened.
func (m *Metrics) ConnOpened() {
	if m != nil {
		m.conns.Add(1)
	}
}

// ConnClosed counts a client connection that closed.
func (m *Metrics) ConnClosed() {
	if m != nil {
		m.conns.Add(-1)
	}
}

// SetConnectionLimit reports the most client connections the component holds at once
// (0: no limit), as tracecar_client_connections_limit, so that an alert can compare
// tracecar_client_connections with it.
func (m *Metrics) SetConnectionLimit(n int) {
	if m != nil {
		m.limit.Store(int64(max(n, 0)))
	}
}

// Register adds a collector of some other component to the same registry, so that /metrics
// serves it too.
func (m *Metrics) Register(c prometheus.Collector) error {
	return m.reg.Register(c)
}

// Gatherer returns the registry to scrape. A nil *Metrics gathers nothing.
func (m *Metrics) Gatherer() prometheus.Gatherer {
	if m == nil {
		return prometheus.Gatherers{}
	}
	return m.reg
}

// RuntimeCollectors returns the Go runtime and process collectors, for a server that wants
// them on its /metrics.
func RuntimeCollectors() []prometheus.Collector {
	return []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		cpuCollector{},
	}
}

var (
	requestsDesc = prometheus.NewDesc("tracecar_requests_total",
		"CQL requests received from clients, by opcode.", []string{"opcode"}, nil)
	latencyDesc = prometheus.NewDesc("tracecar_request_duration_seconds",
		"Time from a request's arrival at the sidecar until its response was sent back, by opcode.", []string{"opcode"}, nil)
	addedDesc = prometheus.NewDesc("tracecar_added_latency_seconds",
		"Time requests spent in the sidecar itself, not waiting on the node: from the read of the node's response off the socket until it was queued for the client.", nil, nil)
	connsDesc = prometheus.NewDesc("tracecar_client_connections",
		"Client connections open now.", nil, nil)
	buildDesc = prometheus.NewDesc("tracecar_build_info",
		"Always 1: the labels name the running tracecar's version, VCS revision and Go version.",
		[]string{"version", "revision", "goversion"}, nil)
	limitDesc = prometheus.NewDesc("tracecar_client_connections_limit",
		"The most client connections held at once (--max-connections); absent when there is no limit.", nil, nil)
)

// collector sums the shards when scraped.
type collector struct{ m *Metrics }

// withExemplars attaches the exemplars of opcode label l to its latency histogram h, each
// to the bucket its value falls in.
func (c collector) withExemplars(h prometheus.Metric, l int) prometheus.Metric {
	var exs []prometheus.Exemplar
	for b := range c.m.exemplars[l] {
		if e := c.m.exemplars[l][b].Load(); e != nil {
			exs = append(exs, *e)
		}
	}
	if len(exs) == 0 {
		return h
	}
	m, err := prometheus.NewMetricWithExemplars(h, exs...)
	if err != nil { // a trace id is 32 hex digits, well within OpenMetrics' label limits
		return h
	}
	return m
}

// Describe sends the descriptions of the series.
func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- requestsDesc
	ch <- latencyDesc
	ch <- addedDesc
	ch <- connsDesc
	ch <- limitDesc
	ch <- buildDesc
}

// Collect sends the sums over the shards. A request counted during the scrape may show in
// one series and not yet in another, as with any concurrent scrape.
func (c collector) Collect(ch chan<- prometheus.Metric) {
	var counted [numLabels]uint64
	if f := c.m.requests.Load(); f != nil {
		for op, n := range (*f)() {
			counted[labelOf[op]] += n
		}
	}
	for l, name := range labels {
		requests, sumNS := counted[l], uint64(0)
		var counts [numBuckets + 1]uint64
		for s := range c.m.shards {
			oc := &c.m.shards[s].ops[l]
			requests += oc.requests.Load()
			sumNS += oc.sumNS.Load()
			for b := range counts {
				counts[b] += oc.buckets[b].Load()
			}
		}
		ch <- prometheus.MustNewConstMetric(requestsDesc, prometheus.CounterValue, float64(requests), name)
		cumulative := make(map[float64]uint64, numBuckets)
		var total uint64
		for b, upper := range LatencyBuckets {
			total += counts[b]
			cumulative[upper] = total
		}
		total += counts[numBuckets]
		ch <- c.withExemplars(prometheus.MustNewConstHistogram(latencyDesc, total, float64(sumNS)/1e9, cumulative, name), l)
	}
	var addedCounts [numAddedBuckets + 1]uint64
	var addedSumNS uint64
	for s := range c.m.shards {
		sh := &c.m.shards[s]
		addedSumNS += sh.addedSumNS.Load()
		for b := range addedCounts {
			addedCounts[b] += sh.added[b].Load()
		}
	}
	cumulative := make(map[float64]uint64, numAddedBuckets)
	var total uint64
	for b, upper := range AddedLatencyBuckets {
		total += addedCounts[b]
		cumulative[upper] = total
	}
	total += addedCounts[numAddedBuckets]
	ch <- prometheus.MustNewConstHistogram(addedDesc, total, float64(addedSumNS)/1e9, cumulative)
	ch <- prometheus.MustNewConstMetric(connsDesc, prometheus.GaugeValue, float64(c.m.conns.Load()))
	if n := c.m.limit.Load(); n > 0 {
		ch <- prometheus.MustNewConstMetric(limitDesc, prometheus.GaugeValue, float64(n))
	}
	ch <- prometheus.MustNewConstMetric(buildDesc, prometheus.GaugeValue, 1, build.Version, build.Revision, build.GoVersion)
}

// build is the running binary, for tracecar_build_info.
var build = buildinfo.Read()
