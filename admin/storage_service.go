package admin

import (
	"context"
	"math"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/tracecar/tracecar/admin/adminapi"

	"github.com/tracecar/tracecar/tracing"
)

// Limits of the slow_query parameters.
const (
	// MaxThresholdMicros is the largest threshold that still fits a time.Duration.
	MaxThresholdMicros = math.MaxInt64 / int64(time.Microsecond)
	// MaxTTLSeconds is Cassandra's largest TTL, 20 years: the CQL sink writes rows USING TTL.
	MaxTTLSeconds = 630720000
)

// SlowQuery is the JSON of GET /storage_service/slow_query.
type SlowQuery = adminapi.SlowQuery

// getSlowQuery serves GET /storage_service/slow_query.
func (s *scyllaAPI) getSlowQuery(ctx *fasthttp.RequestCtx, _ string) error {
	return writeJSON(ctx, slowQueryOf(s.tr.Config()))
}

// setSlowQuery serves POST /storage_service/slow_query: enable, fast, threshold and ttl,
// each optional; an absent one keeps its value. All are parsed before any is applied, and
// the tracer gets them in one configuration.
func (s *scyllaAPI) setSlowQuery(ctx *fasthttp.RequestCtx, _ string) error {
	p, err := readParams(ctx, "enable", "fast", "threshold", "ttl", "for")
	if err != nil {
		return err
	}
	d, err := p.forParam()
	if err != nil {
		return err
	}
	enable, hasEnable, err := p.boolean("enable")
	if err != nil {
		return err
	}
	fast, hasFast, err := p.boolean("fast")
	if err != nil {
		return err
	}
	threshold, hasThreshold, err := p.integer("threshold", 0, MaxThresholdMicros,
		"an integer number of microseconds from 0 to "+strconv.FormatInt(MaxThresholdMicros, 10)+", such as 500000")
	if err != nil {
		return err
	}
	ttl, hasTTL, err := p.integer("ttl", 0, MaxTTLSeconds,
		"an integer number of seconds from 0 to "+strconv.Itoa(MaxTTLSeconds)+", such as 86400")
	if err != nil {
		return err
	}
	return s.toggle(ctx, "POST /storage_service/slow_query", d, func() ([]TimerSetting, bool, error) {
		old, cur, err := s.applySlowQuery(ctx, hasEnable, enable, hasFast, fast, hasThreshold, threshold, hasTTL, ttl)
		if err != nil {
			return nil, false, err
		}
		var set []TimerSetting
		if hasEnable {
			set = append(set, boolSetting(SettingEnable, old.Enable, cur.Enable))
		}
		if hasFast {
			set = append(set, boolSetting(SettingFast, old.Fast, cur.Fast))
		}
		if hasThreshold {
			set = append(set, intSetting(SettingThreshold, old.ThresholdMicros, cur.ThresholdMicros))
		}
		if hasTTL {
			set = append(set, intSetting(SettingTTL, old.TTLSeconds, cur.TTLSeconds))
		}
		costly := cur.Enable && ((hasEnable || hasFast) && !cur.Fast || hasThreshold && cur.ThresholdMicros == 0)
		return set, costly, nil
	})
}

// applySlowQuery applies the given slow_query parameters to the sidecar, and to the node
// when it takes them, and writes the admin log line.
func (s *scyllaAPI) applySlowQuery(ctx *fasthttp.RequestCtx, hasEnable, enable, hasFast, fast, hasThreshold bool, threshold int64, hasTTL bool, ttl int64) (old, cur tracing.Config, err error) {
	old, cur, err = s.updateConfig(func(c tracing.Config) tracing.Config {
		if hasEnable {
			c.Enable = enable
		}
		if hasFast {
			c.Fast = fast
		}
		if hasThreshold {
			c.ThresholdMicros = threshold
		}
		if hasTTL {
			c.TTLSeconds = ttl
		}
		return c
	})
	if err != nil {
		return old, cur, err
	}
	if s.node != nil && s.apply.SlowQuery {
		err := s.applyToNode("slow_query", func(c context.Context) error {
			return s.node.SetSlowQuery(c, cur.Enable, cur.Fast, cur.ThresholdMicros, cur.TTLSeconds)
		}, func(c tracing.Config) tracing.Config {
			c.Enable, c.Fast, c.ThresholdMicros, c.TTLSeconds = old.Enable, old.Fast, old.ThresholdMicros, old.TTLSeconds
			return c
		})
		if err != nil {
			return old, cur, err
		}
	}
	s.audit(ctx, "slow_query").
		Interface("old", slowQueryOf(old)).Interface("new", slowQueryOf(cur)).
		Str("mode", cur.Mode()).Msg("admin change")
	return old, cur, nil
}

// getProbability serves GET /storage_service/trace_probability: a bare number.
func (s *scyllaAPI) getProbability(ctx *fasthttp.RequestCtx, _ string) error {
	writeProbability(ctx, s.tr.Config().Probability)
	return nil
}

// probabilityParam reads the required probability parameter of a POST: a number from 0
// to 1; and for, when the endpoint takes it (timed).
func probabilityParam(ctx *fasthttp.RequestCtx, timed bool) (float64, time.Duration, error) {
	allowed := []string{"probability"}
	if timed {
		allowed = append(allowed, "for")
	}
	p, err := readParams(ctx, allowed...)
	if err != nil {
		return 0, 0, err
	}
	prob, ok, err := p.probability("probability")
	if err != nil {
		return 0, 0, err
	}
	d, err := p.forParam()
	if err != nil {
		return 0, 0, err
	}
	if !ok {
		return 0, 0, missing("probability", "a number from 0 to 1, such as 0.01")
	}
	return prob, d, nil
}

// writeProbability answers with a probability as a bare JSON number, as ScyllaDB does.
func writeProbability(ctx *fasthttp.RequestCtx, p float64) {
	writeJSON(ctx, adminapi.Probability(p))
}

// setProbability serves POST /storage_service/trace_probability?probability=P.
func (s *scyllaAPI) setProbability(ctx *fasthttp.RequestCtx, _ string) error {
	prob, d, err := probabilityParam(ctx, true)
	if err != nil {
		return err
	}
	return s.toggle(ctx, "POST /storage_service/trace_probability", d, func() ([]TimerSetting, bool, error) {
		old, cur, err := s.applyProbability(ctx, prob)
		if err != nil {
			return nil, false, err
		}
		return []TimerSetting{floatSetting(SettingProbability, old.Probability, cur.Probability)}, cur.Probability > 0, nil
	})
}

// applyProbability applies a trace probability to the sidecar, and to the node when it
// takes it, and writes the admin log line.
func (s *scyllaAPI) applyProbability(ctx *fasthttp.RequestCtx, prob float64) (old, cur tracing.Config, err error) {
	old, cur, err = s.updateConfig(func(c tracing.Config) tracing.Config {
		c.Probability = prob
		return c
	})
	if err != nil {
		return old, cur, err
	}
	if s.node != nil && s.apply.TraceProbability {
		err := s.applyToNode("trace_probability", func(c context.Context) error {
			return s.node.SetTraceProbability(c, prob)
		}, func(c tracing.Config) tracing.Config {
			c.Probability = old.Probability
			return c
		})
		if err != nil {
			return old, cur, err
		}
	}
	s.audit(ctx, "trace_probability").
		Float64("old", old.Probability).Float64("new", cur.Probability).
		Str("mode", cur.Mode()).Msg("admin change")
	return old, cur, nil
}

// getLoggingLevels serves GET /storage_service/logging_level: every logger that GET
// /system/logger lists, the node's (node:NAME) included, with its level.
func (s *scyllaAPI) getLoggingLevels(ctx *fasthttp.RequestCtx, _ string) error {
	out := adminapi.LoggerLevels{}
	for _, n := range s.logs.Names() {
		l, err := s.logs.Level(n)
		if err != nil {
			continue // removed since Names
		}
		out = append(out, adminapi.LoggerLevel{Key: n, Value: l})
	}
	if names := s.nodeLoggers(); len(names) > 0 {
		c, cancel := nodeContext()
		defer cancel()
		for _, name := range names {
			n, _ := nodeName(name)
			l, err := s.node.Level(c, n)
			if err != nil {
				return nodeError("logger "+name, err)
			}
			out = append(out, adminapi.LoggerLevel{Key: name, Value: l})
		}
	}
	return writeJSON(ctx, out)
}
