package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/capture"
)

// writerSecrets are what TestSecretsInNoWriter feeds the sidecar; none may come out.
var writerSecrets = []string{
	"SECRET-ROLE-PW-1", "SECRET-ALTER-PW-2", "SECRET-LITERAL-3", "SECRET-BOUND-4", "SECRET-MAP-PW-5",
	"SECRET-QUERY-TOKEN-6", "SECRET-QUERY-PW-7", "SECRET-FORM-PW-8", "SECRET-WRONG-BEARER-9", "SECRET-ADMIN-TOKEN-10",
	"SECRET-NODE-PW-11", // the sidecar's own login to the node, which is the client's too (SASL)
}

// otlpCollector keeps the bodies of the OTLP/HTTP requests it receives, uncompressed.
type otlpCollector struct {
	mu     sync.Mutex
	bodies bytes.Buffer
}

func (o *otlpCollector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, _ := io.ReadAll(body)
	o.mu.Lock()
	o.bodies.Write(b)
	o.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
}

func (o *otlpCollector) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.bodies.String()
}

// adminDo sends method path to the admin API with the bearer token, and returns the code
// and the body.
func adminDo(tb testing.TB, base, token, method, path, form string) (int, []byte) {
	tb.Helper()
	var body io.Reader
	if form != "" {
		body = strings.NewReader(form)
	}
	req, _ := http.NewRequest(method, base+path, body)
	if form != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestSecretsInNoWriter feeds one sidecar the same secrets through every way in (role and
// user passwords, a literal, a bound value and a password map in CQL; token and password
// query and form parameters, a wrong bearer token and the admin token itself over the
// admin API), with every writer on: the audit file, syslog and table, every logger at
// trace level, the slow log, OTLP spans, the CQL sink and the capture. Then it reads every
// output and fails on any secret found.
func TestSecretsInNoWriter(t *testing.T) {
	const adminToken = "SECRET-ADMIN-TOKEN-10"
	dir := t.TempDir()
	sock := filepath.Join(dir, "log.sock")
	pc, err := net.ListenPacket("unixgram", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	var syslogBuf lockedBuffer
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			syslogBuf.Write(append(buf[:n:n], '\n'))
		}
	}()
	otlp := &otlpCollector{}
	collector := httptest.NewServer(otlp)
	defer collector.Close()

	logBuf := &lockedBuffer{}
	reg, err := logs.New(logs.Config{Format: "json", Writer: logBuf, Level: "trace"})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	auditDir := filepath.Join(dir, "audit")
	nodeAddr := mustAuthNode(t, "cassandra:SECRET-NODE-PW-11")
	cfg := stackConfig{Node: nodeAddr, NodeUsername: "cassandra", NodePassword: "SECRET-NODE-PW-11", Listen: "127.0.0.1:0", Admin: "127.0.0.1:0", RingSize: 1000, AdminToken: adminToken,
		CQLSink: true, OTLPEndpoint: collector.URL, CaptureDir: filepath.Join(dir, "capture"),
		Audit: mustAuditFlags(t, "--audit-dir", auditDir, "--audit-syslog", "unixgram://"+sock, "--audit-table",
			"--audit-categories", "AUTH,DDL,DCL,DML,QUERY,ADMIN")}
	st, err := startStack(t.Context(), cfg, reg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			if err := st.stop(); err != nil {
				t.Errorf("stop: %v", err)
			}
		}
	}
	defer stop()
	if err := st.tracer.SetConfig(tracing.Config{Enable: true, Probability: 1, ThresholdMicros: 0, TTLSeconds: 600}); err != nil {
		t.Fatal(err)
	}
	if code, b := adminDo(t, st.Admin, adminToken, "POST", "/tracecar/capture?enable=true&duration=2m", ""); code != 200 {
		t.Fatalf("start the capture: %d %s", code, b)
	}
	// The admin API: secrets in the query string, a form body, a wrong bearer token.
	_, _ = adminDo(t, st.Admin, adminToken, "POST", "/storage_service/slow_query?enable=true&threshold=0&token=SECRET-QUERY-TOKEN-6&password=SECRET-QUERY-PW-7", "")
	_, _ = adminDo(t, st.Admin, "", "POST", "/storage_service/slow_query?enable=true&token=SECRET-QUERY-TOKEN-6", "")
	_, _ = adminDo(t, st.Admin, adminToken, "POST", "/tracecar/audit", "enable=true&admin_password=SECRET-FORM-PW-8")
	_, _ = adminDo(t, st.Admin, "SECRET-WRONG-BEARER-9", "POST", "/storage_service/trace_probability?probability=1", "")

	// CQL through the sidecar.
	host, port, _ := net.SplitHostPort(st.Sidecar)
	c := gocql.NewCluster(host)
	c.Port = atoi(t, port)
	c.DisableInitialHostLookup = true
	c.Timeout = 10 * time.Second
	c.Authenticator = gocql.PasswordAuthenticator{Username: "cassandra", Password: "SECRET-NODE-PW-11"}
	s, err := c.CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"CREATE KEYSPACE sec WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
		"CREATE TABLE sec.t (k int PRIMARY KEY, v text, m map<text, text>)",
		"CREATE ROLE carol WITH PASSWORD = 'SECRET-ROLE-PW-1' AND LOGIN = true",
		"ALTER ROLE carol WITH PASSWORD = 'SECRET-ALTER-PW-2'",
		"INSERT INTO sec.t (k, v) VALUES (1, 'SECRET-LITERAL-3')",
		"INSERT INTO sec.t (k, m) VALUES (3, {'password': 'SECRET-MAP-PW-5'})",
	} {
		if err := s.Query(q).Exec(); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := s.Query("INSERT INTO sec.t (k, v) VALUES (?, ?)", 2, "SECRET-BOUND-4").Exec(); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// Wait for the sinks: the CQL sink's rows of the role statements, and the spans.
	direct := authSession(t, st.Node, "cassandra", "SECRET-NODE-PW-11")
	var cqlRows strings.Builder
	deadline := time.Now().Add(60 * time.Second)
	for {
		cqlRows.Reset()
		n := dumpTable(t, direct, "tracecar_traces.sessions", &cqlRows)
		dumpTable(t, direct, "tracecar_traces.events", &cqlRows)
		if n > 0 && strings.Contains(cqlRows.String(), "ALTER ROLE carol") && strings.Contains(otlp.String(), "ALTER ROLE carol") &&
			strings.Contains(syslogBuf.String(), "ALTER ROLE carol") || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	code, b := adminDo(t, st.Admin, adminToken, "POST", "/tracecar/capture?enable=false", "")
	var cs capture.Status
	if err := json.Unmarshal(b, &cs); code != 200 || err != nil || cs.Last == nil {
		t.Fatalf("stop the capture: %d %s", code, b)
	}
	var auditRows strings.Builder
	dumpTable(t, direct, "audit.audit_log", &auditRows)
	stop() // flushes the audit file and the logs

	var files strings.Builder
	for _, d := range []string{auditDir} {
		filepath.Walk(d, func(p string, info os.FileInfo, err error) error {
			if err == nil && !info.IsDir() {
				b, _ := os.ReadFile(p)
				files.Write(b)
			}
			return nil
		})
	}
	capt := string(mustContents(t, cs.Last.File))
	outputs := map[string]string{
		"audit file":      files.String(),
		"audit syslog":    syslogBuf.String(),
		"audit table":     auditRows.String(),
		"logs":            logBuf.String(),
		"OTLP spans":      otlp.String(),
		"CQL sink tables": cqlRows.String(),
		"capture":         capt,
	}
	for name, out := range outputs {
		// Each output must hold what was fed, so that finding no secret in it means
		// something: the role statement's redacted text, or the admin change.
		want := "ALTER ROLE carol"
		if name == "audit file" || name == "audit syslog" || name == "audit table" {
			want = "token=<redacted>"
		}
		if name == "logs" {
			want = `"slowlog"`
		}
		if !strings.Contains(out, want) {
			t.Errorf("%s: %q is not there: the writer was not fed (%d bytes)", name, want, len(out))
		}
		for _, secret := range writerSecrets {
			if i := strings.Index(out, secret); i >= 0 {
				t.Errorf("%s leaks %s: …%s…", name, secret, out[max(0, i-200):min(len(out), i+50)])
			}
		}
	}
}

// dumpTable writes every row of table to w, and returns the rows; an absent table has none.
func dumpTable(tb testing.TB, s *gocql.Session, table string, w io.Writer) int {
	tb.Helper()
	iter := s.Query("SELECT * FROM " + table).Iter()
	n := 0
	for {
		row := map[string]any{}
		if !iter.MapScan(row) {
			break
		}
		n++
		fmt.Fprintf(w, "%v\n", row)
	}
	iter.Close()
	return n
}
