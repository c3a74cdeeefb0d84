package admin

import (
	"bytes"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/valyala/fasthttp"
)

// openMetricsFormats are the formats /metrics negotiates with a scraper whose Accept header
// names OpenMetrics, as Prometheus's does: OpenMetrics carries the latency histograms'
// exemplars. Anyone else (curl's */* included) gets the Prometheus text format, as before.
var openMetricsFormats = []expfmt.Format{expfmt.FmtOpenMetrics_1_0_0, expfmt.FmtOpenMetrics_0_0_1, expfmt.FmtText}

// getMetrics serves GET /metrics in the Prometheus text format, or in OpenMetrics when the
// scraper asks for it.
func (s *opsAPI) getMetrics(ctx *fasthttp.RequestCtx, _ string) error {
	mfs, err := s.gatherer.Gather()
	if err != nil {
		return err
	}
	format := expfmt.NewFormat(expfmt.TypeTextPlain)
	if accept := ctx.Request.Header.Peek("Accept"); bytes.Contains(accept, []byte(expfmt.OpenMetricsType)) {
		format = expfmt.NegotiateAccept(http.Header{"Accept": {string(accept)}}, openMetricsFormats...)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, format)
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return err
		}
	}
	if c, ok := enc.(expfmt.Closer); ok {
		if err := c.Close(); err != nil { // OpenMetrics' final "# EOF"
			return err
		}
	}
	ctx.SetContentType(string(format))
	ctx.SetBody(buf.Bytes())
	return nil
}

// Modes are the tracing modes that the tracecar_tracing_mode gauge has a series for.
var Modes = []string{"off", "fast", "full", "sampled", "parent"}

// Descriptions of the series read from the tracer at scrape time. They are counted by the
// tracer itself, which /tracecar/status reads too, so the two never disagree.
var (
	slowSessionsDesc = prometheus.NewDesc("tracecar_slow_sessions_total",
		"Sessions recorded into the sinks: slow ones, and every sampled and client session.", nil, nil)
	tracedDesc = prometheus.NewDesc("tracecar_traced_total",
		"Requests that got a tracing session.", nil, nil)
	droppedDesc = prometheus.NewDesc("tracecar_sink_dropped_total",
		"Sessions a sink dropped because its queue was full.", []string{"sink"}, nil)
	sinkErrorsDesc = prometheus.NewDesc("tracecar_sink_errors_total",
		"Sink writes that failed.", []string{"sink"}, nil)
	modeDesc = prometheus.NewDesc("tracecar_tracing_mode",
		"1 for the current tracing mode, 0 for the others.", []string{"mode"}, nil)
	thresholdDesc = prometheus.NewDesc("tracecar_slow_query_threshold_seconds",
		"The slow-query threshold.", nil, nil)
	probabilityDesc = prometheus.NewDesc("tracecar_trace_probability",
		"The share of requests traced fully whatever their duration.", nil, nil)
	otlpFailuresDesc = prometheus.NewDesc("tracecar_otlp_export_failures_total",
		"OTLP exports that failed (the receiver refused them or could not be reached).", nil, nil)
	otlpDroppedDesc = prometheus.NewDesc("tracecar_otlp_spans_dropped_total",
		"Spans lost in failed OTLP exports.", nil, nil)
	followDesc = prometheus.NewDesc("tracecar_follow_client_sampling",
		"1 when parent-based sampling is on: requests whose W3C trace context is sampled are traced fully (mode parent).", nil, nil)
	ctxInvalidDesc = prometheus.NewDesc("tracecar_trace_context_invalid_total",
		"W3C trace contexts in requests' custom payloads that were ignored because they were malformed, by reason.", []string{"reason"}, nil)
)

// tracerCollector reads the tracer's counters and configuration when scraped.
type tracerCollector struct{ tr Tracer }

// Describe sends the fixed descriptions.
func (c tracerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{slowSessionsDesc, tracedDesc, droppedDesc, sinkErrorsDesc,
		modeDesc, thresholdDesc, probabilityDesc, otlpFailuresDesc, otlpDroppedDesc, followDesc, ctxInvalidDesc} {
		ch <- d
	}
}

// Collect sends the current values.
func (c tracerCollector) Collect(ch chan<- prometheus.Metric) {
	cfg := c.tr.Config()
	st := c.tr.Stats()
	mode := st.Mode
	if mode == "" {
		mode = cfg.Mode()
	}
	ch <- prometheus.MustNewConstMetric(slowSessionsDesc, prometheus.CounterValue, float64(st.SlowSessions))
	ch <- prometheus.MustNewConstMetric(tracedDesc, prometheus.CounterValue, float64(st.Traced))
	for sink, n := range st.Dropped {
		ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, float64(n), sink)
	}
	for sink, n := range st.Errors {
		ch <- prometheus.MustNewConstMetric(sinkErrorsDesc, prometheus.CounterValue, float64(n), sink)
	}
	for _, m := range Modes {
		v := 0.0
		if m == mode {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(modeDesc, prometheus.GaugeValue, v, m)
	}
	ch <- prometheus.MustNewConstMetric(thresholdDesc, prometheus.GaugeValue, float64(cfg.ThresholdMicros)/1e6)
	ch <- prometheus.MustNewConstMetric(probabilityDesc, prometheus.GaugeValue, cfg.Probability)
	follow := 0.0
	if cfg.FollowClientSampling {
		follow = 1
	}
	ch <- prometheus.MustNewConstMetric(followDesc, prometheus.GaugeValue, follow)
	for reason, n := range st.TraceContextInvalid {
		ch <- prometheus.MustNewConstMetric(ctxInvalidDesc, prometheus.CounterValue, float64(n), reason)
	}
	if e := st.OTLPExport; e != nil {
		ch <- prometheus.MustNewConstMetric(otlpFailuresDesc, prometheus.CounterValue, float64(e.Failures))
		ch <- prometheus.MustNewConstMetric(otlpDroppedDesc, prometheus.CounterValue, float64(e.SpansDropped))
	}
}
