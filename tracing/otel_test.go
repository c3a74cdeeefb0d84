package tracing

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tracecar/tracecar/internal/cql"
)

// keptExporter keeps its spans across Shutdown, which the Tracer's Close calls.
type keptExporter struct{ *tracetest.InMemoryExporter }

func (keptExporter) Shutdown(context.Context) error { return nil }

func attrMap(kvs []attribute.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.Emit()
	}
	return m
}

// TestOTelSink runs full-mode sessions through a Tracer into an in-memory exporter.
func TestOTelSink(t *testing.T) {
	exp := keptExporter{tracetest.NewInMemoryExporter()}
	sink, err := NewOTelSink(context.Background(), OTelOptions{Exporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	tr := New(Options{Sinks: []Sink{sink}})
	c := newCaller(tr, testClient, testCoord)
	prepare(t, c, 1)
	mustConfig(t, tr, Config{Enable: true})

	h, f := mustRequest(t, reqHeader(3, 0), executeMsg([]byte("k")), nil)
	c.OnRequest(h, f, nil)
	c.Sent(3)
	rh, rf := mustResponse(t, respHeader(3, 0), cql.ResponsePrefix{}, rowsMsg(), nil)
	c.OnResponse(rh, rf, nil)
	c.ResponseSent(3)

	h, f = mustRequest(t, reqHeader(4, 0), cql.Query{Query: "insert into nope (k) values (1)"}, nil)
	c.OnRequest(h, f, nil)
	rh, rf = mustResponse(t, respHeader(4, 0), cql.ResponsePrefix{}, cql.Error{Code: cql.ErrCodeInvalid, Message: "unconfigured table nope"}, nil)
	c.OnResponse(rh, rf, nil)
	c.ResponseSent(4)
	c.Close()
	mustClose(t, tr)

	sessions := map[string]Session{}
	for _, s := range tr.SlowLog(0) {
		sessions[s.ID] = s
	}
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans; want 2", len(spans))
	}
	for _, sp := range spans {
		a := attrMap(sp.Attributes)
		s, ok := sessions[a["tracecar.session_id"]]
		if !ok {
			t.Fatalf("span %q has session id %q, not recorded", sp.Name, a["tracecar.session_id"])
		}
		if !sp.StartTime.Equal(s.StartedAt) {
			t.Errorf("span start %v; want the session's %v", sp.StartTime, s.StartedAt)
		}
		if want := s.StartedAt.Add(time.Duration(s.DurationUS) * time.Microsecond); !sp.EndTime.Equal(want) {
			t.Errorf("span end %v; want %v", sp.EndTime, want)
		}
		if a["db.system.name"] != "cassandra" || a["db.query.text"] != redactLiterals(s.Parameters["query"]) {
			t.Errorf("db.system.name, db.query.text = %q, %q; want cassandra, %q", a["db.system.name"], a["db.query.text"], s.Parameters["query"])
		}
		if sp.SpanKind != trace.SpanKindClient {
			t.Errorf("span kind %v; want client", sp.SpanKind)
		}
		if a["server.address"] != testCoord.Addr().String() || a["server.port"] != fmt.Sprint(testCoord.Port()) {
			t.Errorf("server.address:port = %s:%s; want the node %v", a["server.address"], a["server.port"], testCoord)
		}
		if a["network.peer.address"] != testClient.Addr().String() || a["network.peer.port"] != fmt.Sprint(testClient.Port()) {
			t.Errorf("network.peer.address:port = %s:%s; want the client %v", a["network.peer.address"], a["network.peer.port"], testClient)
		}
		if _, old := a["db.statement"]; old {
			t.Errorf("db.statement set without OTEL_SEMCONV_STABILITY_OPT_IN=database/dup")
		}
		if len(sp.Events) != len(s.Events) {
			t.Fatalf("span has %d events; want %d", len(sp.Events), len(s.Events))
		}
		for i, e := range sp.Events {
			want := s.StartedAt.Add(time.Duration(s.Events[i].SourceElapsedUS) * time.Microsecond)
			if e.Name != s.Events[i].Activity || !e.Time.Equal(want) {
				t.Errorf("span event %d = %q at %v; want %q at %v", i, e.Name, e.Time, s.Events[i].Activity, want)
			}
		}
		switch sp.Name {
		case "SELECT keyspace1.standard1":
			want := map[string]string{"db.operation.name": "SELECT", "cassandra.consistency.level": "local_one",
				"cassandra.page.size": "5000", "tracecar.mode": "full", "tracecar.command": "EXECUTE",
				"db.namespace": "keyspace1", "db.collection.name": "standard1", "db.query.summary": "SELECT standard1",
				"tracecar.param.param[0]": "<redacted: 1 bytes>", "db.response.returned_rows": "1"}
			for k, v := range want {
				if a[k] != v {
					t.Errorf("SELECT span attribute %s = %q; want %q", k, a[k], v)
				}
			}
			if sp.Status.Code != codes.Unset {
				t.Errorf("SELECT span status %v; want unset", sp.Status)
			}
		case "INSERT nope":
			if sp.Status.Code != codes.Error || sp.Status.Description != "invalid (0x2200): unconfigured table nope" {
				t.Errorf("INSERT span status %+v; want the CQL error", sp.Status)
			}
			if a["db.response.status_code"] != "8704" || a["error.type"] != "8704" {
				t.Errorf("db.response.status_code, error.type = %q, %q; want 8704 (0x2200)", a["db.response.status_code"], a["error.type"])
			}
			if a["db.query.text"] != "insert into nope (k) values (?)" {
				t.Errorf("db.query.text = %q; want the literal redacted", a["db.query.text"])
			}
		default:
			t.Errorf("unexpected span %q", sp.Name)
		}
	}
}

// TestOTelNodeEvents checks that node events are placed after "sent to node".
func TestOTelNodeEvents(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	sink, err := NewOTelSink(context.Background(), OTelOptions{Exporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := &Session{ID: "x", StartedAt: start, DurationUS: 100, Command: "QUERY", Parameters: map[string]string{"query": "select 1"},
		Events: []Event{{Activity: EventSentToNode, Source: SourceSidecar, SourceElapsedUS: 10},
			{Activity: "Parsing", Source: SourceNode, SourceElapsedUS: 5}}}
	if err := sink.Write(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if err := sink.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 || len(spans[0].Events) != 2 {
		t.Fatalf("spans = %d, events = %v; want 1 span with 2 events", len(spans), spans)
	}
	if got, want := spans[0].Events[1].Time, start.Add(15*time.Microsecond); !got.Equal(want) {
		t.Errorf("node event at %v; want %v", got, want)
	}
	if err := sink.Close(context.Background()); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func TestNewOTelSinkNoExporter(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	if _, err := NewOTelSink(context.Background(), OTelOptions{}); !errors.Is(err, ErrNoExporter) {
		t.Errorf("NewOTelSink with nothing set = %v; want ErrNoExporter", err)
	}
	s, err := NewOTelSink(context.Background(), OTelOptions{Endpoint: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatalf("NewOTelSink(URL) = %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = s.Close(ctx) // nothing to export; a dead collector must not hang Close past ctx
}

func TestStatement(t *testing.T) {
	tests := []struct {
		params map[string]string
		want   string
	}{
		{map[string]string{"query": "SELECT 1"}, "SELECT 1"},
		{map[string]string{"query[0]": "A", "prepared_id[1]": "0x01", "query[2]": "C"}, "A; ?; C"},
		{map[string]string{}, ""},
	}
	for _, tt := range tests {
		if got := statement(&Session{Parameters: tt.params}); got != tt.want {
			t.Errorf("statement(%v) = %q; want %q", tt.params, got, tt.want)
		}
	}
}
