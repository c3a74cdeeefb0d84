package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/internal/testkit/drivertest"
	"github.com/tracecar/tracecar/tracing"
)

// rolesScript creates and alters roles with passwords through the sidecar, queried and
// prepared, runs a few ordinary statements (which the node traces), then reads the node's
// system_traces as the superuser and as an ordinary login that may only SELECT one
// keyspace, and prints every row it read.
const rolesScript = `
import os, sys
from cassandra.cluster import Cluster
from cassandra.auth import PlainTextAuthProvider
host, port, v, tag = os.environ['CQL_HOST'], int(os.environ['CQL_PORT']), os.environ['PROTO'], os.environ['TAG']
def connect(user, pw):
    kw = {} if v == 'default' else {'protocol_version': int(v)}
    c = Cluster([host], port=port, auth_provider=PlainTextAuthProvider(user, pw), **kw)
    return c, c.connect()
c, s = connect('cassandra', 's3cret')
print('protocol', c.protocol_version, file=sys.stderr)
s.execute("CREATE KEYSPACE IF NOT EXISTS app WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
s.execute("CREATE TABLE IF NOT EXISTS app.t (k int PRIMARY KEY, v text)")
s.execute("CREATE ROLE carol_%s WITH PASSWORD = 'Literal-Create-%s' AND LOGIN = true" % (tag, tag))
s.execute("CREATE USER bob_%s WITH PASSWORD 'User-Create-%s' NOSUPERUSER" % (tag, tag))
s.execute("ALTER ROLE carol_%s WITH PASSWORD = 'Literal-Alter-%s'" % (tag, tag))
s.execute("ALTER USER bob_%s WITH PASSWORD 'User-Alter-%s'" % (tag, tag))
s.execute(s.prepare("ALTER ROLE carol_%s WITH PASSWORD = 'Prepared-Alter-%s'" % (tag, tag)))
s.execute("CREATE ROLE reader_%s WITH PASSWORD = 'Reader-Pass-%s' AND LOGIN = true" % (tag, tag))
s.execute("GRANT SELECT ON KEYSPACE app TO reader_%s" % tag)
s.execute("INSERT INTO app.t (k, v) VALUES (1, 'x')")
s.execute(s.prepare("SELECT v FROM app.t WHERE k = ?"), (1,))
def dump(sess, who):
    for r in sess.execute("SELECT session_id, command, parameters, request FROM system_traces.sessions"):
        print(who, 'session', r.session_id, r.command, r.request, dict(r.parameters or {}))
    for r in sess.execute("SELECT session_id, activity FROM system_traces.events"):
        print(who, 'event', r.session_id, r.activity)
dump(s, 'superuser')
c.shutdown()
c, s = connect('reader_' + tag, 'Reader-Pass-' + tag)
dump(s, 'reader')
c.shutdown()
`

// TestNodeTraceKeepsNoPassword is the acceptance test of the sidecar's tracing flag on
// requests that carry a secret: a node that requires a login (as tracecar node --auth),
// sampling at probability 1 in the sidecar and in the node itself (--node-apply's
// default), and the Python driver through the sidecar at its default protocol (v5), v4
// and v3. CREATE and ALTER of a ROLE and a USER, with passwords in the text of a QUERY or
// of a prepared statement (the nodes take no bound password: that case is
// cql.TestCarriesSecret's and tracing's TestSecretNotAskedOfNode's), must
// leave no password in system_traces.sessions or events, read by the superuser or by an
// ordinary login, while the node does trace the ordinary statements and the sidecar
// records its own redacted sessions of the role statements.
func TestNodeTraceKeepsNoPassword(t *testing.T) {
	drivertest.RequirePython(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := node.New(node.Config{Auth: "cassandra:s3cret"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	if err := srv.SetTraceProbability(1); err != nil {
		t.Fatal(err)
	}
	st := mustStack(t, stackConfig{Node: ln.Addr().String(), NodeUsername: "cassandra", NodePassword: "s3cret"})
	if err := st.tracer.SetConfig(tracing.Config{Probability: 1, ThresholdMicros: tracing.DefaultThresholdMicros, TTLSeconds: 600}); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "roles.py")
	if err := os.WriteFile(script, []byte(rolesScript), 0o644); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(st.Sidecar)
	for _, v := range []string{"default", "4", "3"} {
		t.Run("protocol "+v, func(t *testing.T) {
			tag := "v" + v
			cctx, ccancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer ccancel()
			cmd := exec.CommandContext(cctx, drivertest.Python, script)
			cmd.Env = append(os.Environ(), "CQL_HOST="+host, "CQL_PORT="+port, "PROTO="+v, "TAG="+tag)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("python: %v\n%s\n%s", err, out, stderr.String())
			}
			if v == "default" && !strings.Contains(stderr.String(), "protocol 5") {
				t.Errorf("the Python driver at its default protocol did not negotiate v5: %s", stderr.String())
			}
			for _, who := range []string{"superuser", "reader"} {
				rows := 0
				for _, line := range strings.Split(string(out), "\n") {
					if !strings.HasPrefix(line, who+" ") {
						continue
					}
					rows++
					for _, secret := range []string{"Literal-Create-", "User-Create-", "Literal-Alter-", "User-Alter-", "Prepared-Alter-", "Reader-Pass-"} {
						if strings.Contains(line, secret+tag) {
							t.Errorf("the node's trace, read by the %s, holds the password %s: %s", who, secret+tag, line)
						}
					}
				}
				// The node traces what carries no secret: the check above read real rows.
				if !strings.Contains(string(out), who+" session") || !strings.Contains(string(out), "INSERT INTO app.t") {
					t.Errorf("the %s read no node session of the ordinary statements (%d rows):\n%s", who, rows, out)
				}
			}
			// The sidecar still records the role statements, redacted.
			found := false
			for _, s := range st.tracer.SlowLog(0) {
				q := s.Parameters["query"]
				if strings.Contains(q, "ALTER ROLE carol_"+tag+" WITH PASSWORD = ?") {
					found = true
				}
				for _, v := range s.Parameters {
					if strings.Contains(v, "-"+tag) && !strings.HasPrefix(v, "<redacted") {
						t.Errorf("the sidecar's session %s keeps a password: %q", s.ID, v)
					}
				}
			}
			if !found {
				t.Errorf("the sidecar recorded no session of ALTER ROLE carol_%s", tag)
			}
		})
	}
}

// TestNodeTracingOff samples every request through a sidecar with --node-tracing on and
// off: on, the node keeps its own trace of the sidecar's sampled requests and the sessions
// carry its events; off, the node keeps none and the sessions are the sidecar's alone.
func TestNodeTracingOff(t *testing.T) {
	for _, off := range []bool{false, true} {
		t.Run(map[bool]string{false: "on", true: "off"}[off], func(t *testing.T) {
			nodeAddr := mustAuthNode(t, "cassandra:s3cret")
			st := mustStack(t, stackConfig{Node: nodeAddr, NodeUsername: "cassandra", NodePassword: "s3cret", NoNodeTracing: off})
			if err := st.tracer.SetConfig(tracing.Config{Probability: 1, ThresholdMicros: tracing.DefaultThresholdMicros, TTLSeconds: 600}); err != nil {
				t.Fatal(err)
			}
			client := authSession(t, st.Sidecar, "cassandra", "s3cret")
			const marker = "SELECT release_version FROM system.local WHERE key = 'local' -- node tracing"
			var rv string
			if err := client.Query(marker).Scan(&rv); err != nil {
				t.Fatal(err)
			}
			var sess tracing.Session
			deadline := time.Now().Add(30 * time.Second)
			for sess.ID == "" && time.Now().Before(deadline) {
				for _, s := range st.tracer.SlowLog(0) {
					if strings.HasPrefix(s.Parameters["query"], "SELECT release_version") && strings.HasSuffix(s.Parameters["query"], "-- node tracing") {
						sess = s
					}
				}
				time.Sleep(100 * time.Millisecond)
			}
			if sess.ID == "" {
				t.Fatal("the sidecar recorded no session of the sampled request")
			}
			nodeEvents := 0
			for _, e := range sess.Events {
				if e.Source == tracing.SourceNode {
					nodeEvents++
				}
			}
			direct := authSession(t, nodeAddr, "cassandra", "s3cret")
			iter := direct.Query("SELECT parameters FROM system_traces.sessions").Iter()
			traced := 0
			var params map[string]string
			for iter.Scan(&params) {
				if strings.Contains(params["query"], "-- node tracing") {
					traced++
				}
			}
			if err := iter.Close(); err != nil {
				t.Fatal(err)
			}
			if got := traced > 0 && nodeEvents > 0; got == off {
				t.Errorf("--node-tracing off=%v: the node kept %d traces of the request and the session has %d node events", off, traced, nodeEvents)
			}
		})
	}
}
