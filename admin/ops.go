package admin

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The series that an operator's alerts need and that only the API can measure: whether
// the node answers. The readiness check that /readyz runs is run at each scrape too, so
// that Prometheus sees a node that stopped answering within one scrape interval, without
// anyone polling /readyz.

// nodeUpTimeout bounds the readiness check of one scrape, well inside Prometheus's
// default scrape timeout of 10 s.
const nodeUpTimeout = time.Second

var nodeUpDesc = prometheus.NewDesc("tracecar_node_up",
	"1 when the node behind the sidecar accepted a connection at this scrape (the /readyz check), else 0.", nil, nil)

// readyCollector runs the readiness check when scraped.
type readyCollector struct{ ready func(context.Context) error }

// Describe sends the description of tracecar_node_up.
func (c readyCollector) Describe(ch chan<- *prometheus.Desc) { ch <- nodeUpDesc }

// Collect runs the check and sends its outcome.
func (c readyCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), nodeUpTimeout)
	defer cancel()
	up := 1.0
	if c.ready(ctx) != nil {
		up = 0
	}
	ch <- prometheus.MustNewConstMetric(nodeUpDesc, prometheus.GaugeValue, up)
}

// opsCollectors returns the collectors of this file that the server's Config calls for.
func opsCollectors(s *core) []prometheus.Collector {
	if s.ready == nil {
		return nil
	}
	return []prometheus.Collector{readyCollector{s.ready}}
}
