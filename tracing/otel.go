package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// ErrNoExporter is returned by NewOTelSink when OTelOptions names no exporter and neither
// OTEL_EXPORTER_OTLP_ENDPOINT nor OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set.
var ErrNoExporter = errors.New("no OpenTelemetry exporter: set an endpoint, stdout, OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")

// OTLP protocols, as OTEL_EXPORTER_OTLP_PROTOCOL names them.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// tracesPath is the OTLP/HTTP path of traces, appended to a base endpoint URL.
const tracesPath = "/v1/traces"

// OTelOptions configure NewOTelSink. Exactly one exporter is used: Exporter when set,
// else stdout when Endpoint is "stdout", else OTLP to Endpoint, else OTLP configured by the
// SDK itself from the OTEL_EXPORTER_OTLP_* environment variables (endpoint, headers,
// timeout, compression, certificates) when OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set. The zero value with neither set is an error.
// NewOTelSink reads it once.
type OTelOptions struct {
	// Endpoint is the OTLP base URL, such as "http://collector:4318", as
	// OTEL_EXPORTER_OTLP_ENDPOINT takes it: with OTLP/HTTP, "/v1/traces" is appended unless
	// the URL already ends with it. "stdout" prints the spans instead.
	Endpoint string
	// Protocol is ProtocolHTTP or ProtocolGRPC. "" means OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
	// else OTEL_EXPORTER_OTLP_PROTOCOL, else ProtocolHTTP.
	Protocol string
	// Exporter overrides Endpoint; tests pass tracetest.NewInMemoryExporter().
	Exporter sdktrace.SpanExporter
	// ServiceName is the service.name resource attribute. "" means OTEL_SERVICE_NAME, else
	// service.name in OTEL_RESOURCE_ATTRIBUTES, else "tracecar". The other
	// OTEL_RESOURCE_ATTRIBUTES are added to the resource in any case.
	ServiceName string
	// DupSemconv also emits the attribute names of the database conventions before v1.26
	// (db.system, db.statement, db.cassandra.*), as OTEL_SEMCONV_STABILITY_OPT_IN=database/dup
	// asks; that variable sets it too.
	DupSemconv bool
	// Logger gets export failures, at most one line a minute. The zero value logs nothing.
	Logger zerolog.Logger
}

// OTelSink turns sessions into OpenTelemetry spans through the SDK's batch span
// processor: one CLIENT span per session, with the session's own start and end times, the
// attributes of the OpenTelemetry database conventions for Cassandra, tracecar.* attributes
// for the rest, and its events as span events. It has its own TracerProvider and leaves
// the global one alone. It is safe for concurrent use.
type OTelSink struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
	exp    *countingExporter
	dup    bool
	ended  atomic.Uint64 // spans handed to the batch processor
}

// ResolveProtocol returns the OTLP protocol p names, or that the environment names when p
// is empty, and an error for a protocol tracecar does not speak.
func ResolveProtocol(p string) (string, error) {
	if p == "" {
		p = os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	}
	if p == "" {
		p = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch p {
	case "", ProtocolHTTP:
		return ProtocolHTTP, nil
	case ProtocolGRPC:
		return ProtocolGRPC, nil
	}
	return "", fmt.Errorf("OTLP protocol %q: want %s or %s", p, ProtocolHTTP, ProtocolGRPC)
}

// TracesURL returns the OTLP/HTTP traces URL of the base URL endpoint: endpoint with
// "/v1/traces" appended, or endpoint itself when it already ends with it.
func TracesURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "", fmt.Errorf("OTLP endpoint %q: want a URL such as http://127.0.0.1:4318", endpoint)
	}
	if !strings.HasSuffix(u.Path, tracesPath) {
		u.Path = strings.TrimSuffix(u.Path, "/") + tracesPath
	}
	return u.String(), nil
}

// EnvEndpointSet reports whether the environment names an OTLP endpoint for traces.
func EnvEndpointSet() bool {
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// NewOTelSink returns an OTelSink exporting as o says. ctx bounds the exporter's setup.
func NewOTelSink(ctx context.Context, o OTelOptions) (*OTelSink, error) {
	exp, err := newExporter(ctx, o)
	if err != nil {
		return nil, err
	}
	res, err := newResource(ctx, o.ServiceName)
	if err != nil {
		return nil, err
	}
	ce := &countingExporter{SpanExporter: exp, log: o.Logger}
	tp := sdktrace.NewTracerProvider(
		// Blocking: a full batch queue holds Write back instead of dropping the span
		// unseen, so that the loss shows where tracecar counts it: at the sink's own
		// bounded queue (tracecar_sink_dropped_total{sink="otel"}).
		sdktrace.WithBatcher(ce, sdktrace.WithBlocking()),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
	)
	dup := o.DupSemconv || optIn("database/dup")
	return &OTelSink{tp: tp, tracer: tp.Tracer("github.com/tracecar/tracecar/tracing"), exp: ce, dup: dup}, nil
}

func newExporter(ctx context.Context, o OTelOptions) (sdktrace.SpanExporter, error) {
	if o.Exporter != nil {
		return o.Exporter, nil
	}
	if o.Endpoint == "stdout" {
		return stdouttrace.New(stdouttrace.WithWriter(os.Stdout))
	}
	if o.Endpoint == "" && !EnvEndpointSet() {
		return nil, ErrNoExporter
	}
	proto, err := ResolveProtocol(o.Protocol)
	if err != nil {
		return nil, err
	}
	var exp sdktrace.SpanExporter
	switch {
	case proto == ProtocolGRPC && o.Endpoint != "":
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(o.Endpoint))
	case proto == ProtocolGRPC:
		exp, err = otlptracegrpc.New(ctx) // the SDK reads the environment
	case o.Endpoint != "":
		var u string
		if u, err = TracesURL(o.Endpoint); err == nil {
			exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(u))
		}
	default:
		exp, err = otlptracehttp.New(ctx) // the SDK reads the environment, and appends /v1/traces
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP %s exporter: %w", proto, err)
	}
	return exp, nil
}

// newResource builds the service's resource: service.name "tracecar", overridden by
// OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME (which the SDK's detector reads, in
// that precedence), overridden by name when set.
func newResource(ctx context.Context, name string) (*resource.Resource, error) {
	opts := []resource.Option{
		resource.WithAttributes(attribute.String("service.name", "tracecar")),
		resource.WithFromEnv(),
	}
	if name != "" {
		opts = append(opts, resource.WithAttributes(attribute.String("service.name", name)))
	}
	res, err := resource.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry resource (OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME): %w", err)
	}
	return res, nil
}

// optIn reports whether OTEL_SEMCONV_STABILITY_OPT_IN, a comma-separated list, holds v.
func optIn(v string) bool {
	for _, f := range strings.Split(os.Getenv("OTEL_SEMCONV_STABILITY_OPT_IN"), ",") {
		if strings.TrimSpace(f) == v {
			return true
		}
	}
	return false
}

// exportLogEvery bounds how often a failing exporter is logged.
const exportLogEvery = time.Minute

// countingExporter counts failed exports and the spans they lost, and logs a failure at
// most once every exportLogEvery with the receiver's answer. It reports success to the
// batch processor, which would otherwise hand every failure to the global OTel error
// handler.
type countingExporter struct {
	sdktrace.SpanExporter
	log      zerolog.Logger
	failures atomic.Uint64
	dropped  atomic.Uint64
	exported atomic.Uint64 // spans the receiver accepted
	lastLog  atomic.Int64  // unix nanoseconds
}

func (c *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := c.SpanExporter.ExportSpans(ctx, spans)
	if err == nil {
		c.exported.Add(uint64(len(spans)))
		return nil
	}
	n := c.failures.Add(1)
	d := c.dropped.Add(uint64(len(spans)))
	now := time.Now().UnixNano()
	if last := c.lastLog.Load(); (last == 0 || now-last >= int64(exportLogEvery)) && c.lastLog.CompareAndSwap(last, now) {
		c.log.Warn().Err(err).Uint64("failures", n).Uint64("spans_dropped", d).
			Msg("OTLP export failed; spans dropped (logged at most once a minute)")
	}
	return nil
}

// ExportStats are the failures of an OTelSink's exporter since it was created.
type ExportStats struct {
	// Failures counts the exports that failed.
	Failures uint64 `json:"failures"`
	// SpansDropped counts the spans those exports carried, and after Close the spans the
	// batch processor still held when its shutdown ran out of time: every span lost.
	SpansDropped uint64 `json:"spans_dropped"`
	// SpansExported counts the spans the receiver accepted.
	SpansExported uint64 `json:"spans_exported"`
}

// ExportStats returns the exporter's counters.
func (o *OTelSink) ExportStats() ExportStats {
	return ExportStats{Failures: o.exp.failures.Load(), SpansDropped: o.exp.dropped.Load(), SpansExported: o.exp.exported.Load()}
}

// Name returns "otel".
func (*OTelSink) Name() string { return "otel" }

// Write starts and ends the session's span at the session's own times. Sidecar events are
// at their own times; node events at theirs when the node gave a time, else at "sent to
// node" plus their own elapsed time.
func (o *OTelSink) Write(_ context.Context, s *Session) error {
	sc := describe(s)
	// A root span per session, or a child of the caller's span when the request carried
	// its trace context: the write context only bounds the call.
	_, span := o.tracer.Start(remoteParent(s), sc.spanName(),
		trace.WithTimestamp(s.StartedAt),
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(sc.attributes(s, o.dup)...))
	var sentUS int64
	for _, e := range s.Events {
		at := s.StartedAt.Add(time.Duration(e.SourceElapsedUS) * time.Microsecond)
		switch {
		case e.Source == SourceNode && !e.Time.IsZero():
			at = e.Time
		case e.Source == SourceNode:
			at = at.Add(time.Duration(sentUS) * time.Microsecond)
		case e.Activity == EventSentToNode:
			sentUS = e.SourceElapsedUS
		}
		span.AddEvent(e.Activity, trace.WithTimestamp(at),
			trace.WithAttributes(attribute.String("source", e.Source), attribute.Int64("tracecar.source_elapsed_us", e.SourceElapsedUS)))
	}
	if s.Error != "" {
		span.SetStatus(codes.Error, s.Error)
	}
	o.ended.Add(1) // before End, which blocks while the batch queue is full
	span.End(trace.WithTimestamp(s.StartedAt.Add(time.Duration(s.DurationUS) * time.Microsecond)))
	return nil
}

// remoteParent returns a context holding the caller's span as the remote parent of the
// session's span, when the session carries a trace context, so that the span joins the
// caller's trace (same trace id, the caller's span as its parent, its tracestate kept);
// otherwise context.Background(), and the span is a root.
func remoteParent(s *Session) context.Context {
	ctx := context.Background()
	if s.TraceID == "" {
		return ctx
	}
	tid, err := trace.TraceIDFromHex(s.TraceID)
	if err != nil {
		return ctx
	}
	sid, err := trace.SpanIDFromHex(s.ParentSpanID)
	if err != nil {
		return ctx
	}
	// The tracestate was validated on the data path; one the SDK reads otherwise is dropped
	// rather than losing the parent.
	ts, _ := trace.ParseTraceState(normalizeState(s.TraceState))
	psc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(s.traceFlags), TraceState: ts, Remote: true,
	})
	return trace.ContextWithRemoteSpanContext(ctx, psc)
}

// normalizeState returns a tracestate without the spaces and tabs around its members and
// without empty members, which the specification allows and the SDK's parser does not.
func normalizeState(v string) string {
	if !strings.ContainsAny(v, " \t") && !strings.Contains(v, ",,") && !strings.HasPrefix(v, ",") && !strings.HasSuffix(v, ",") {
		return v
	}
	var kept []string
	for _, m := range strings.Split(v, ",") {
		if m = strings.Trim(m, " \t"); m != "" {
			kept = append(kept, m)
		}
	}
	return strings.Join(kept, ",")
}

// ForceFlush exports the spans the batch processor holds.
func (o *OTelSink) ForceFlush(ctx context.Context) error { return o.tp.ForceFlush(ctx) }

// Close flushes the batch processor and shuts the exporter down. The spans it could not
// deliver before ctx ran out (a receiver that never answers) are counted in SpansDropped,
// so that every span written is either exported or counted as dropped.
func (o *OTelSink) Close(ctx context.Context) error {
	err := o.tp.Shutdown(ctx)
	ended, done := o.ended.Load(), o.exp.exported.Load()+o.exp.dropped.Load()
	if ended > done {
		o.exp.dropped.Add(ended - done)
	}
	return err
}
