package audit

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Status is the audit log's state, as GET /tracecar/audit and /tracecar/status give it:
// the settings, the policy, the records counted by category, and each sink's state.
type Status struct {
	View
	Policy string `json:"policy"`
	// Records counts the records made since start, by category.
	Records map[string]uint64 `json:"records"`
	// Dropped counts the records dropped by every sink.
	Dropped uint64       `json:"dropped"`
	Sinks   []SinkStatus `json:"sinks"`
	// Error says which sinks fail and why; empty when every sink works.
	Error string `json:"error,omitempty"`
}

// SinkStatus is one sink's state.
type SinkStatus struct {
	Name string `json:"name"`
	// State is "ok", or "failing" while its writes or syncs fail (they are retried).
	State string `json:"state"`
	// Error is the last failure and FailingSince when the failures began, while failing.
	Error        string     `json:"error,omitempty"`
	FailingSince *time.Time `json:"failing_since,omitempty"`
	// Written counts the records the sink accepted; Dropped those it lost (drop policy,
	// or its queue at stop while failing); Waits the records whose request waited for room
	// (block policy); Queued the records waiting now; Syncs the syncs done.
	Written uint64 `json:"written"`
	Dropped uint64 `json:"dropped"`
	Waits   uint64 `json:"waits"`
	Queued  int    `json:"queued"`
	Syncs   uint64 `json:"syncs"`
}

// Status returns the log's state.
func (l *Log) Status() Status {
	st := Status{View: l.Settings().View(), Policy: l.cfg.Policy.String(), Records: map[string]uint64{},
		Sinks: []SinkStatus{}}
	for c := AUTH; c <= ADMIN; c++ {
		st.Records[c.String()] = l.counts[c].Load()
	}
	for _, q := range l.sinks {
		s := SinkStatus{Name: q.sink.Name(), State: "ok", Written: q.written.Load(), Dropped: q.dropped.Load(),
			Waits: q.waits.Load(), Queued: q.queued(), Syncs: q.syncs.Load()}
		if f := q.state.Load(); f != nil {
			since := f.since.UTC()
			s.State, s.Error, s.FailingSince = "failing", f.err, &since
		}
		st.Dropped += s.Dropped
		st.Sinks = append(st.Sinks, s)
	}
	if err := l.Err(); err != nil {
		st.Error = err.Error()
	}
	return st
}

// Collector returns the audit log's series for /metrics:
// tracecar_audit_records_total{category}, tracecar_audit_written_total{sink},
// tracecar_audit_dropped_total{sink}, tracecar_audit_waits_total{sink},
// tracecar_audit_queued{sink}, tracecar_audit_sink_up{sink} and tracecar_audit_enabled.
func (l *Log) Collector() prometheus.Collector { return collector{l} }

var (
	descRecords = prometheus.NewDesc("tracecar_audit_records_total",
		"Audit records made, by category (AUTH, DDL, DCL, DML, QUERY, ADMIN).", []string{"category"}, nil)
	descWritten = prometheus.NewDesc("tracecar_audit_written_total",
		"Audit records a sink accepted (file, syslog, table).", []string{"sink"}, nil)
	descDropped = prometheus.NewDesc("tracecar_audit_dropped_total",
		"Audit records a sink lost: its queue was full under --audit-policy drop, or it was still failing at stop.", []string{"sink"}, nil)
	descWaits = prometheus.NewDesc("tracecar_audit_waits_total",
		"Audit records whose request waited for room in a sink's queue (--audit-policy block).", []string{"sink"}, nil)
	descQueued = prometheus.NewDesc("tracecar_audit_queued",
		"Audit records waiting in a sink's queue.", []string{"sink"}, nil)
	descUp = prometheus.NewDesc("tracecar_audit_sink_up",
		"1 while an audit sink works, 0 while its writes fail (they are retried; /readyz says why).", []string{"sink"}, nil)
	descEnabled = prometheus.NewDesc("tracecar_audit_enabled",
		"1 while the audit log is on.", nil, nil)
)

type collector struct{ l *Log }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRecords, descWritten, descDropped, descWaits, descQueued, descUp, descEnabled} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	l := c.l
	for cat := AUTH; cat <= ADMIN; cat++ {
		ch <- prometheus.MustNewConstMetric(descRecords, prometheus.CounterValue, float64(l.counts[cat].Load()), cat.String())
	}
	for _, q := range l.sinks {
		n := q.sink.Name()
		up := 1.0
		if q.state.Load() != nil {
			up = 0
		}
		ch <- prometheus.MustNewConstMetric(descWritten, prometheus.CounterValue, float64(q.written.Load()), n)
		ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue, float64(q.dropped.Load()), n)
		ch <- prometheus.MustNewConstMetric(descWaits, prometheus.CounterValue, float64(q.waits.Load()), n)
		ch <- prometheus.MustNewConstMetric(descQueued, prometheus.GaugeValue, float64(q.queued()), n)
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, up, n)
	}
	on := 0.0
	if l.Enabled() {
		on = 1
	}
	ch <- prometheus.MustNewConstMetric(descEnabled, prometheus.GaugeValue, on)
}
