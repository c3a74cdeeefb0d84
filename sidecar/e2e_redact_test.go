package sidecar

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/gocql/gocql"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/cqlsink"
)

// TestE2ESecretsRedacted sends a PASSWORD and string literals as statements without bound
// values through the sidecar with gocql, in full mode at threshold 0, and checks that none
// reaches the admin API's slow log, the slowlog log line or the OTel spans, while the
// statements are recorded with their literals replaced. gocql sends CREATE ROLE and CREATE
// KEYSPACE as QUERY frames; it prepares DML, so the INSERT's literal arrives in a PREPARE
// and is recorded for the PREPARE and for the EXECUTE (by the prepared text).
func TestE2ESecretsRedacted(t *testing.T) {
	const password, literal = "hunter2-pw", "literal-secret"
	var logBuf syncBuffer
	slowLog := zerolog.New(&logBuf)
	exp := keptExporter{tracetest.NewInMemoryExporter()}
	sink, err := tracing.NewOTelSink(context.Background(), tracing.OTelOptions{Exporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	st := mustTracedStack(t, tracing.Options{Sinks: []tracing.Sink{sink}, SlowLog: &slowLog},
		tracing.Config{Enable: true, ThresholdMicros: 0, TTLSeconds: 60}, nil)

	api := admin.New(admin.Config{}, st.tr, nil)
	aln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- api.Serve(ctx, aln) }()
	t.Cleanup(func() { cancel(); <-done })

	s := st.session(t, "none")
	workload(t, s, "red", "x")
	role := fmt.Sprintf("CREATE ROLE app WITH PASSWORD = '%s' AND LOGIN = true", password)
	s.Query(role).Exec() // the embedded node has no roles: the error is recorded too
	insert := fmt.Sprintf("INSERT INTO red.kv (v, k) VALUES ('%s', 2)", literal)
	if err := s.Query(insert).Exec(); err != nil {
		t.Fatalf("%s: %v", insert, err)
	}
	const wantRole, wantInsert = "CREATE ROLE app WITH PASSWORD = ? AND LOGIN = ?", "INSERT INTO red.kv (v, k) VALUES (?, ?)"
	findSession(t, st.tr, "the role's session", queryIs(wantRole))
	findSession(t, st.tr, "the insert's session", queryIs(wantInsert))

	var slowLogJSON string
	waitFor(t, "both statements in /tracecar/slow_log, the log and the spans", func() bool {
		resp, err := http.Get("http://" + aln.Addr().String() + "/tracecar/slow_log")
		if err != nil {
			return false
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		slowLogJSON = string(body)
		sink.ForceFlush(context.Background())
		var spans strings.Builder
		for _, sp := range exp.GetSpans() {
			fmt.Fprintln(&spans, sp.Name, sp.Attributes)
		}
		for _, text := range []string{slowLogJSON, logBuf.String(), spans.String()} {
			if !strings.Contains(text, wantRole) || !strings.Contains(text, wantInsert) {
				return false
			}
		}
		return true
	})
	var spans strings.Builder
	for _, sp := range exp.GetSpans() {
		fmt.Fprintln(&spans, sp.Name, sp.Attributes, sp.Events)
	}
	for what, text := range map[string]string{"/tracecar/slow_log": slowLogJSON, "the slowlog log": logBuf.String(), "the spans": spans.String()} {
		for _, secret := range []string{password, literal, "SimpleStrategy"} {
			if strings.Contains(text, secret) {
				t.Errorf("%s shows %q:\n%s", what, secret, text)
			}
		}
	}
}

// TestE2ESecretsRedactedSampled samples a statement with a string literal (gocql prepares
// it, so the sampled PREPARE carries it): the node's own "Parsing <statement>" event,
// merged into the session, has its literal redacted too.
func TestE2ESecretsRedactedSampled(t *testing.T) {
	st := mustTracedStack(t, tracing.Options{}, tracing.Config{Probability: 1, ThresholdMicros: tracing.DefaultThresholdMicros, TTLSeconds: 60},
		func(s *gocql.Session) tracing.Options { return tracing.Options{NodeEvents: cqlsink.NewNodeEvents(s)} })
	const literal = "sampled-literal-secret"
	s := st.session(t, "none")
	workload(t, s, "redsampled", "x")
	insert := fmt.Sprintf("INSERT INTO redsampled.kv (v, k) VALUES ('%s', 3)", literal)
	if err := s.Query(insert).Exec(); err != nil {
		t.Fatalf("%s: %v", insert, err)
	}
	got := findSession(t, st.tr, "the insert's session with node events", func(s tracing.Session) bool {
		return s.Parameters["query"] == "INSERT INTO redsampled.kv (v, k) VALUES (?, ?)" && len(activities(s, tracing.SourceNode)) > 0
	})
	found := false
	for _, a := range activities(got, tracing.SourceNode) {
		if strings.Contains(a, literal) {
			t.Errorf("node event %q shows the literal", a)
		}
		found = found || a == "Parsing INSERT INTO redsampled.kv (v, k) VALUES (?, ?)"
	}
	if !found {
		t.Errorf("node events %q; want the node's Parsing event with the statement normalized", activities(got, tracing.SourceNode))
	}
}
