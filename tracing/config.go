// Package tracing is tracecar's slow-query tracing engine: the runtime configuration as one
// atomic snapshot, per-connection request tables, session records with events, sampling,
// the slow-log ring and the sinks (OpenTelemetry, log line; the CQL table sink and the
// node-event source live in tracing/cqlsink, which needs gocql).
//
// tracing knows nothing about sockets. The sidecar gives each client connection a Conn and
// calls it once per request (OnRequest) and once per response (OnResponse), plus Sent and
// ResponseSent after its writes. Those calls are short and allocation-free with tracing
// off, in fast mode below the threshold, and in full mode below the threshold; bench_test.go
// proves it.
package tracing

import (
	"errors"
	"fmt"
)

// Config is the tracing configuration that the admin API toggles. It is replaced as a
// whole, so the data path always sees enable, fast and threshold from one change. The zero
// value means tracing off; DefaultConfig gives ScyllaDB's defaults. A Config is a plain
// value, safe to copy and share.
type Config struct {
	// Enable turns slow-query logging on.
	Enable bool `json:"enable"`
	// Fast records sessions only, without events, and costs one clock read per request.
	Fast bool `json:"fast"`
	// ThresholdMicros is the latency above which a request is slow. A request is slow
	// when its duration is strictly greater, so 0 records everything.
	ThresholdMicros int64 `json:"threshold"`
	// TTLSeconds is the time to live of records written to the CQL table sink.
	TTLSeconds int64 `json:"ttl"`
	// Probability is the share of requests traced fully, in [0,1], whatever their duration.
	Probability float64 `json:"-"`
}

// Defaults of Config, as in ScyllaDB.
const (
	DefaultThresholdMicros = 500000
	DefaultTTLSeconds      = 86400
)

// DefaultConfig returns enable=false, fast=false, threshold=500000 µs, ttl=86400 s and
// probability 0.
func DefaultConfig() Config {
	return Config{ThresholdMicros: DefaultThresholdMicros, TTLSeconds: DefaultTTLSeconds}
}

// Mode names the tracing mode the configuration puts the data path in: "off", "fast",
// "full", or "sampled" when only the probability is set.
func (c Config) Mode() string {
	switch {
	case c.Enable && c.Fast:
		return "fast"
	case c.Enable:
		return "full"
	case c.Probability > 0:
		return "sampled"
	}
	return "off"
}

// ErrInvalidConfig is wrapped by the errors of Config.Validate and Tracer.SetConfig.
var ErrInvalidConfig = errors.New("invalid tracing config")

// Validate reports, wrapping ErrInvalidConfig, the first field out of range: ThresholdMicros
// and TTLSeconds must be >= 0 and Probability in [0,1]. The message names the field as the
// admin API does (threshold, ttl, probability).
func (c Config) Validate() error {
	switch {
	case c.ThresholdMicros < 0:
		return fmt.Errorf("%w: threshold must be >= 0 microseconds, got %d", ErrInvalidConfig, c.ThresholdMicros)
	case c.TTLSeconds < 0:
		return fmt.Errorf("%w: ttl must be >= 0 seconds, got %d", ErrInvalidConfig, c.TTLSeconds)
	case !(c.Probability >= 0 && c.Probability <= 1): // also rejects NaN
		return fmt.Errorf("%w: probability must be in [0,1], got %v", ErrInvalidConfig, c.Probability)
	}
	return nil
}
