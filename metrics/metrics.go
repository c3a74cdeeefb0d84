// Package metrics holds the Prometheus series that tracecar's data path updates per request:
// requests by opcode and their latency. The admin package serves them on /metrics together
// with the series it reads from the tracer when scraped.
//
// The package sits below sidecar and admin so that the sidecar can count requests without
// depending on the admin API (and on fasthttp). Series are resolved once, in New, so that
// the per-request calls are a table lookup and an atomic add: no label hashing, no map and no
// allocation.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/tracecar/tracecar/cql"
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

// Metrics is the set of per-request series. It is safe for concurrent use, and its methods
// on a nil *Metrics do nothing, so a component built without metrics needs no checks.
type Metrics struct {
	reg   *prometheus.Registry
	ops   [256]*opSeries // indexed by opcode; every entry is set
	conns prometheus.Gauge
}

// opSeries are the series of one opcode label.
type opSeries struct {
	requests prometheus.Counter
	latency  prometheus.Observer
}

// New returns Metrics registered in a registry of their own, with every opcode's series
// already created (at zero), so that the first scrape shows them all.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tracecar_requests_total",
		Help: "CQL requests received from clients, by opcode.",
	}, []string{"opcode"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "tracecar_request_duration_seconds",
		Help:    "Time from a request's arrival at the sidecar until its response was sent back, by opcode.",
		Buckets: LatencyBuckets,
	}, []string{"opcode"})
	m.conns = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "tracecar_client_connections",
		Help: "Client connections open now.",
	})
	m.reg.MustRegister(requests, latency, m.conns)

	other := &opSeries{requests: requests.WithLabelValues("other"), latency: latency.WithLabelValues("other")}
	for i := range m.ops {
		m.ops[i] = other
	}
	for _, op := range RequestOpcodes {
		name := op.String()
		m.ops[op] = &opSeries{requests: requests.WithLabelValues(name), latency: latency.WithLabelValues(name)}
	}
	return m
}

// Request counts one request with opcode op.
func (m *Metrics) Request(op cql.Opcode) {
	if m == nil {
		return
	}
	m.ops[op].requests.Inc()
}

// Latency records that a request with opcode op took d, from its arrival until its response
// was sent. It does not count the request: call Request for that.
func (m *Metrics) Latency(op cql.Opcode, d time.Duration) {
	if m == nil {
		return
	}
	m.ops[op].latency.Observe(d.Seconds())
}

// ConnOpened counts a client connection that opened.
func (m *Metrics) ConnOpened() {
	if m != nil {
		m.conns.Inc()
	}
}

// ConnClosed counts a client connection that closed.
func (m *Metrics) ConnClosed() {
	if m != nil {
		m.conns.Dec()
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
	}
}
