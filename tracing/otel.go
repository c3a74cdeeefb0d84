package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// ErrNoExporter is returned by NewOTelSink when OTelOptions names no exporter and the
// OTEL_EXPORTER_OTLP_ENDPOINT environment variable is not set either.
var ErrNoExporter = errors.New("no OpenTelemetry exporter: set an endpoint, stdout, or OTEL_EXPORTER_OTLP_ENDPOINT")

// OTelOptions configure NewOTelSink. Exactly one exporter is used: Exporter when set,
// else stdout when Endpoint is "stdout", else OTLP/HTTP to Endpoint (a URL), else OTLP/HTTP
// configured from the OTEL_EXPORTER_OTLP_* environment variables when
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set. It is read
// once by NewOTelSink.
type OTelOptions struct {
	// Endpoint is an OTLP/HTTP URL such as "http://collector:4318", or "stdout".
	Endpoint string
	// Exporter overrides Endpoint; tests pass tracetest.NewInMemoryExporter().
	Exporter sdktrace.SpanExporter
	// ServiceName is the service.name resource attribute; "" means "tracecar".
	ServiceName string
}

// OTelSink turns sessions into OpenTelemetry spans through the SDK's batch span
// processor: one span per session, with the session's own start and end times, db.*
// attributes, tracecar.* attributes for the rest, and its events as span events. It has
// its own TracerProvider and leaves the global one alone. It is safe for concurrent use.
type OTelSink struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
}

// NewOTelSink returns an OTelSink exporting as o says. ctx bounds the exporter's setup.
func NewOTelSink(ctx context.Context, o OTelOptions) (*OTelSink, error) {
	exp := o.Exporter
	if exp == nil {
		var err error
		switch {
		case o.Endpoint == "stdout":
			exp, err = stdouttrace.New(stdouttrace.WithWriter(os.Stdout))
		case o.Endpoint != "":
			exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(o.Endpoint))
		case os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "":
			exp, err = otlptracehttp.New(ctx)
		default:
			return nil, ErrNoExporter
		}
		if err != nil {
			return nil, fmt.Errorf("otel exporter %q: %w", o.Endpoint, err)
		}
	}
	name := o.ServiceName
	if name == "" {
		name = "tracecar"
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", name))),
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
	)
	return &OTelSink{tp: tp, tracer: tp.Tracer("github.com/tracecar/tracecar/tracing")}, nil
}

// Name returns "otel".
func (*OTelSink) Name() string { return "otel" }

// Write starts and ends the session's span at the session's own times. Node events have
// no common clock with the sidecar, so they are placed at "sent to node" plus their own
// elapsed time.
func (o *OTelSink) Write(_ context.Context, s *Session) error {
	// A root span per session: the write context only bounds the call.
	_, span := o.tracer.Start(context.Background(), spanName(s),
		trace.WithTimestamp(s.StartedAt),
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(spanAttributes(s)...))
	var sentUS int64
	for _, e := range s.Events {
		at := e.SourceElapsedUS
		if e.Source == SourceNode {
			at += sentUS
		} else if e.Activity == EventSentToNode {
			sentUS = e.SourceElapsedUS
		}
		span.AddEvent(e.Activity, trace.WithTimestamp(s.StartedAt.Add(time.Duration(at)*time.Microsecond)),
			trace.WithAttributes(attribute.String("source", e.Source), attribute.Int64("source_elapsed_us", e.SourceElapsedUS)))
	}
	if s.Error != "" {
		span.SetStatus(codes.Error, s.Error)
	}
	span.End(trace.WithTimestamp(s.StartedAt.Add(time.Duration(s.DurationUS) * time.Microsecond)))
	return nil
}

// ForceFlush exports the spans the batch processor holds.
func (o *OTelSink) ForceFlush(ctx context.Context) error { return o.tp.ForceFlush(ctx) }

// Close flushes the batch processor and shuts the exporter down.
func (o *OTelSink) Close(ctx context.Context) error { return o.tp.Shutdown(ctx) }

// statement returns the CQL text of s: its query, or its batch's queries joined by "; ".
func statement(s *Session) string {
	if q, ok := s.Parameters["query"]; ok {
		return q
	}
	var qs []string
	for i := 0; ; i++ {
		q, ok := s.Parameters[indexed("query", i)]
		if !ok {
			if _, unknown := s.Parameters[indexed("prepared_id", i)]; !unknown {
				break
			}
			q = "?"
		}
		qs = append(qs, q)
	}
	return strings.Join(qs, "; ")
}

// operation returns the CQL verb of s, such as SELECT, or BATCH, or the command.
func operation(s *Session) string {
	if s.Command == "BATCH" {
		return "BATCH"
	}
	q := strings.TrimSpace(s.Parameters["query"])
	if i := strings.IndexFunc(q, func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '(' }); i > 0 {
		return strings.ToUpper(q[:i])
	}
	if q != "" {
		return strings.ToUpper(q)
	}
	return s.Command
}

func spanName(s *Session) string { return operation(s) }

func spanAttributes(s *Session) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		attribute.String("db.system", "cassandra"),
		attribute.String("db.operation", operation(s)),
		attribute.String("tracecar.session_id", s.ID),
		attribute.String("tracecar.mode", s.Mode),
		attribute.String("tracecar.command", s.Command),
		attribute.String("tracecar.request", s.Request),
		attribute.String("tracecar.client", s.Client),
		attribute.String("tracecar.coordinator", s.Coordinator),
		attribute.Int64("tracecar.duration_us", s.DurationUS),
	}
	if st := statement(s); st != "" {
		attrs = append(attrs, attribute.String("db.statement", st))
	}
	if s.Error != "" {
		attrs = append(attrs, attribute.String("tracecar.error", s.Error))
	}
	if s.Username != "" {
		attrs = append(attrs, attribute.String("db.user", s.Username))
	}
	for k, v := range s.Parameters {
		switch k {
		case "consistency_level":
			attrs = append(attrs, attribute.String("db.cassandra.consistency_level", v))
		case "page_size":
			attrs = append(attrs, attribute.String("db.cassandra.page_size", v))
		case "query":
		default:
			attrs = append(attrs, attribute.String("tracecar.param."+k, v))
		}
	}
	return attrs
}
