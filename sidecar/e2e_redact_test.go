package sidecar

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/gocql/gocql"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/cqlsink"
)

// TestE2ESecretsRedacted sends passwords and string literals as statements without bound
// values through the sidecar with gocql, in full mode at threshold 0, and checks that no
// password reaches the admin API's slow log, the slowlog log line or the OTel spans, while
// the statements are recorded with their literals replaced, or kept with
// Options.QueryLiterals (--trace-query-literals). With literals kept, only the password
// rules stand between a password and the record: the role statement's (every string of
// CREATE or ALTER ROLE) and the PASSWORD one (a string after PASSWORD or a 'password' key),
// which alone protects the password in the map of an INSERT. gocql sends CREATE ROLE and
// CREATE KEYSPACE as QUERY frames; it prepares DML, so the INSERTs' literals arrive in a
// PREPARE and are recorded for the PREPARE and for the EXECUTE (by the prepared text).
func TestE2ESecretsRedacted(t *testing.T) {
	const password, mapPassword, literal = "hunter2-pw", "map-secret-pw", "literal-secret"
	// The statements with their literals replaced, as every record has them by default and
	// as the spans always have them (a span leaves the host).
	redacted := []string{
		"CREATE ROLE app WITH PASSWORD = ? AND LOGIN = ?",
		"INSERT INTO red.kv (v, k) VALUES (?, ?)",
		"INSERT INTO red.creds (k, m) VALUES (?, ?)",
	}
	for _, tt := range []struct {
		name     string
		literals bool
		// The statements as the slow log and the slowlog log line record them.
		want []string
		// kept must show in those two (literals are kept), and gone must show nowhere.
		kept, gone []string
	}{
		{
			name: "literals redacted",
			want: redacted,
			gone: []string{password, mapPassword, literal, "SimpleStrategy"},
		},
		{
			name:     "literals kept",
			literals: true,
			want: []string{
				"CREATE ROLE app WITH PASSWORD = ? AND LOGIN = true",
				"INSERT INTO red.kv (v, k) VALUES ('" + literal + "', 2)",
				"INSERT INTO red.creds (k, m) VALUES (3, {'user': 'app', 'password': ?})",
			},
			kept: []string{literal},
			gone: []string{password, mapPassword},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var logBuf syncBuffer
			slowLog := zerolog.New(&logBuf)
			exp := keptExporter{tracetest.NewInMemoryExporter()}
			sink, err := tracing.NewOTelSink(context.Background(), tracing.OTelOptions{Exporter: exp})
			if err != nil {
				t.Fatal(err)
			}
			st := mustTracedStack(t, tracing.Options{Sinks: []tracing.Sink{sink}, SlowLog: &slowLog, QueryLiterals: tt.literals},
				tracing.Config{Enable: true, ThresholdMicros: 0, TTLSeconds: 60}, nil)

			api := admin.New(admin.Config{Tracer: st.tr})
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
			if err := s.Query("CREATE TABLE red.creds (k int PRIMARY KEY, m map<text, text>)").Exec(); err != nil {
				t.Fatal(err)
			}
			role := fmt.Sprintf("CREATE ROLE app WITH PASSWORD = '%s' AND LOGIN = true", password)
			s.Query(role).Exec() // the embedded node has no roles: the error is recorded too
			for _, stmt := range []string{
				fmt.Sprintf("INSERT INTO red.kv (v, k) VALUES ('%s', 2)", literal),
				fmt.Sprintf("INSERT INTO red.creds (k, m) VALUES (3, {'user': 'app', 'password': '%s'})", mapPassword),
			} {
				if err := s.Query(stmt).Exec(); err != nil {
					t.Fatalf("%s: %v", stmt, err)
				}
			}
			// A statement is waited for by its head, so that a wrong text fails at once, shown.
			head := func(q string) string {
				h, _, _ := strings.Cut(q, " ?")
				h, _, _ = strings.Cut(h, " VALUES ")
				return h
			}
			for _, w := range tt.want {
				head := head(w)
				got := findSession(t, st.tr, "the session of "+head, func(s tracing.Session) bool {
					return strings.HasPrefix(s.Parameters["query"], head)
				})
				if q := got.Parameters["query"]; q != w {
					t.Errorf("recorded %q; want %q", q, w)
				}
			}

			var slowLogJSON, spans string
			waitFor(t, "every statement in /tracecar/slow_log, the log and the spans", func() bool {
				resp, err := http.Get("http://" + aln.Addr().String() + "/tracecar/slow_log")
				if err != nil {
					return false
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				slowLogJSON = string(body)
				sink.ForceFlush(context.Background())
				var b strings.Builder
				for _, sp := range exp.GetSpans() {
					fmt.Fprintln(&b, sp.Name, sp.Attributes, sp.Events)
				}
				spans = b.String()
				for _, w := range tt.want {
					if !strings.Contains(slowLogJSON, head(w)) || !strings.Contains(logBuf.String(), head(w)) || !strings.Contains(spans, head(w)) {
						return false
					}
				}
				return true
			})
			for _, w := range tt.want {
				if !strings.Contains(slowLogJSON, w) || !strings.Contains(logBuf.String(), w) {
					t.Errorf("the slow log or the slowlog log has no %q", w)
				}
			}
			for _, w := range redacted {
				if !strings.Contains(spans, w) {
					t.Errorf("the spans have no %q", w)
				}
			}
			for what, text := range map[string]string{"/tracecar/slow_log": slowLogJSON, "the slowlog log": logBuf.String(), "the spans": spans} {
				gone := tt.gone
				if what == "the spans" {
					gone = append(gone, literal) // a span never keeps literals
				}
				for _, secret := range gone {
					if strings.Contains(text, secret) {
						t.Errorf("%s shows %q:\n%s", what, secret, text)
					}
				}
				if what == "the spans" {
					continue
				}
				for _, lit := range tt.kept {
					if !strings.Contains(text, lit) {
						t.Errorf("%s does not show the kept literal %q:\n%s", what, lit, text)
					}
				}
			}
		})
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
	// The PREPARE's session, which the node's Parsing event belongs to; the EXECUTE's has
	// the same query, and may be recorded with it.
	got := findSession(t, st.tr, "the insert's session with the node's Parsing event", func(s tracing.Session) bool {
		return s.Parameters["query"] == "INSERT INTO redsampled.kv (v, k) VALUES (?, ?)" &&
			slices.ContainsFunc(activities(s, tracing.SourceNode), func(a string) bool { return strings.HasPrefix(a, "Parsing ") })
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
