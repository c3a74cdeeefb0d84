package loadcheck

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Series that loadcheck reads from a process's /metrics.
const (
	// seriesFineCPU is tracecar's own CPU counter, read with getrusage to the microsecond.
	seriesFineCPU = "tracecar_process_cpu_seconds_total"
	// seriesCPU is the Prometheus process collector's, in clock ticks (10 ms on Linux):
	// with it a run needs about a second of the process's CPU for a 1% resolution.
	seriesCPU = "process_cpu_seconds_total"
	// seriesUserCPU is the user-space part of seriesFineCPU.
	seriesUserCPU = "tracecar_process_cpu_user_seconds_total"
	// seriesAdded is the sidecar's histogram of the time responses spend in it.
	seriesAdded = "tracecar_added_latency_seconds"
	// seriesSessions counts the sessions the sidecar recorded: slow, sampled and client ones.
	seriesSessions = "tracecar_slow_sessions_total"
)

// sample is what one scrape of a process's /metrics tells: its CPU time and the buckets of
// its added-latency histogram, either of which may be missing.
type sample struct {
	cpu     float64 // seconds
	hasCPU  bool
	fine    bool    // cpu came from the microsecond series
	user    float64 // user-space seconds, when hasUser
	hasUser bool
	added   bucket // cumulative counts; nil without the histogram
	// sessions is the sidecar's count of recorded sessions, when hasSessions.
	sessions    float64
	hasSessions bool
}

// scrape GETs url (a /metrics endpoint; the admin token goes to the sidecar's only) and
// reads the series loadcheck uses.
func (c *apiClient) scrape(ctx context.Context, url string, a api) (sample, error) {
	cl := &c.admin
	if a == apiNode {
		cl = &c.node
	}
	body, err := cl.Do(ctx, http.MethodGet, url, nil)
	if err != nil {
		return sample{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	return parseSample(bytes.NewReader(body))
}

// parseSample reads the Prometheus text format.
func parseSample(r io.Reader) (sample, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(r)
	if err != nil {
		return sample{}, fmt.Errorf("parse metrics: %w", err)
	}
	var s sample
	if v, ok := counterValue(mfs[seriesFineCPU]); ok {
		s.cpu, s.hasCPU, s.fine = v, true, true
	} else if v, ok := counterValue(mfs[seriesCPU]); ok {
		s.cpu, s.hasCPU = v, true
	}
	s.user, s.hasUser = counterValue(mfs[seriesUserCPU])
	s.sessions, s.hasSessions = counterValue(mfs[seriesSessions])
	if mf := mfs[seriesAdded]; mf != nil && len(mf.GetMetric()) > 0 {
		h := mf.GetMetric()[0].GetHistogram()
		for _, b := range h.GetBucket() {
			if math.IsInf(b.GetUpperBound(), 1) {
				continue
			}
			s.added.bounds = append(s.added.bounds, b.GetUpperBound())
			s.added.counts = append(s.added.counts, b.GetCumulativeCount())
		}
		s.added.counts = append(s.added.counts, h.GetSampleCount())
	}
	return s, nil
}

func counterValue(mf *dto.MetricFamily) (float64, bool) {
	if mf == nil || len(mf.GetMetric()) == 0 {
		return 0, false
	}
	m := mf.GetMetric()[0]
	if c := m.GetCounter(); c != nil {
		return c.GetValue(), true
	}
	if g := m.GetGauge(); g != nil {
		return g.GetValue(), true
	}
	if u := m.GetUntyped(); u != nil {
		return u.GetValue(), true
	}
	return 0, false
}
