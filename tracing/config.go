// Package tracing is tracecar's slow-query tracing engine: the runtime configuration as one
// atomic snapshot, the per-request API, session records with events, sampling, the
// slow-log ring and the sinks (OpenTelemetry, log line; the CQL table sink and the
// node-event source live in tracing/cqlsink, which needs gocql).
//
// # The per-request API
//
// tracing knows nothing about sockets, and keeps no per-stream state: the caller's own
// record of a request in flight (the sidecar's stream table entry) carries the request's
// Ticket. The sidecar gives each client connection a Conn, and for each request:
//
//	t := conn.Begin(h, frame, comp, now)  // request side, before forwarding the request
//	t.Sent(at)                            // request side, after the write that carried it (only if t.Events())
//	out, t := conn.End(t, h, resp, comp, now) // response side, before forwarding the response
//	conn.Done(t, at)                      // response side, after the write that carried out (only if t.Events())
//
// With tracing off, Begin is one atomic load of the configuration and returns the zero
// Ticket, and End of a zero Ticket is one compare. In fast mode Begin keeps the start time
// and a copy of the frame in a record the Conn reuses, and End reads the clock and records
// a session only for a slow request; Sent and Done are not needed. Full, sampled and
// client-requested tracing decode the request at Begin and build the session with its
// events at Done. now and at are Now() values the caller has read anyway (0 makes tracing
// read the clock), so a request costs one or two clock reads in all. None of these
// allocates with tracing off, in fast mode below the threshold, or in full mode below the
// threshold, once a connection's records have grown (bench_test.go, and the sidecar's
// TestRequestPathAllocs, assert it).
//
// The request side (Begin, Sent) and the response side (End, Done) may run on two
// goroutines; each side must be called from one goroutine at a time. A Ticket's record
// goes back to the Conn when End (fast mode) or Done is done with it; a Ticket that never
// gets its End (a connection that ends with requests in flight) is left to the GC.
//
// # Trace context
//
// A request's W3C trace context, a traceparent (and tracestate) in its custom payload
// (tracecontext.go), makes its session a span of the caller's trace: the Session carries
// TraceID and ParentSpanID, and the OTel sink starts the span with the caller's span as its
// remote parent. With Config.FollowClientSampling a request whose context is sampled is
// traced as a sampled one is, in mode "parent". The context is read only from requests
// that have FlagCustomPayload, and only where tracing looks at the request anyway.
//
// The prepared-statement registry (Statements) is learnt by the caller, which sees every
// PREPARE and its RESULT (cql.ReadPrepared); tracing reads the query text of an EXECUTE from
// it. Requests are counted once, by the caller (Tracer.CountRequests).
//
// # Layers
//
// The files of the package are layers: a file uses declarations of the files below it,
// never of one above it (ci.TestFilesPointDown fails on a cycle, and prints it). From the
// ground up:
//
//	config.go, filter.go          Config; the trace filter and its parameters
//	prepared.go, querycache.go    the prepared-statement registry; the normalized texts cached
//	session.go                    Session and Event, the modes, FloorNote
//	tracecontext.go, rows.go      the W3C trace context; a RESULT's row count
//	ring.go, sink.go, semconv.go  the slow-log ring; Sink, its queue, the log sink; the OTel attributes
//	ticket.go, request.go         a request's Ticket and record; its Parameters, decoded and redacted
//	work.go, otel.go              the WorkMeter and the metered sinks; the OTel sink
//	nodeevents.go, redact.go      the node-event fetcher; the node's events redacted
//	tracer.go                     the Tracer, and the Conn it gives each connection
//	conn.go                       a Conn's per-request API: Begin, End, Done, what they read and record
//	inflight.go, handover.go      the requests in flight; the state handed over
package tracing

import (
	"errors"
	"fmt"
	"time"

	"github.com/tracecar/tracecar/tracing/statements"
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
	// FollowClientSampling traces fully, and records whatever its duration, every request
	// whose W3C trace context (in its custom payload) has the sampled flag: parent-based
	// sampling, mode "parent". Requests without it are left to the other fields.
	FollowClientSampling bool `json:"-"`
	// FloorInterval turns the trace floor on: every distinct statement (statement
	// statistics' key) gets at least one full trace per interval, with the node's own
	// trace, whatever its duration, mode "floor". 0 is off.
	FloorInterval time.Duration `json:"-"`
	// FloorMaxPerSecond bounds the floor's traces a second over all statements; 0 means
	// DefaultFloorMaxPerSecond.
	FloorMaxPerSecond int `json:"-"`
}

// DefaultFloorMaxPerSecond is the trace floor's default bound on its traces a second.
const DefaultFloorMaxPerSecond = statements.DefaultFloorMaxPerSecond

// MaxFloorInterval bounds Config.FloorInterval.
const MaxFloorInterval = 7 * 24 * time.Hour

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
// "full", "sampled" when only the probability is set, "parent" when only
// FollowClientSampling is, or "floor" when only the trace floor is.
func (c Config) Mode() string {
	switch {
	case c.Enable && c.Fast:
		return "fast"
	case c.Enable:
		return "full"
	case c.Probability > 0:
		return "sampled"
	case c.FollowClientSampling:
		return "parent"
	case c.FloorInterval > 0:
		return "floor"
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
	case c.FloorInterval < 0 || c.FloorInterval > MaxFloorInterval:
		return fmt.Errorf("%w: interval must be between 0 (off) and 7 days, got %v", ErrInvalidConfig, c.FloorInterval)
	case c.FloorMaxPerSecond < 0:
		return fmt.Errorf("%w: max_per_second must be >= 1, got %d", ErrInvalidConfig, c.FloorMaxPerSecond)
	}
	return nil
}
