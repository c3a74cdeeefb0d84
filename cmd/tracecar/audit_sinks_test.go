package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/tracecar/tracecar/audit"
)

// mustAuditFlags reads args as the sidecar's --audit-* flags.
func mustAuditFlags(tb testing.TB, args ...string) auditConfig {
	tb.Helper()
	fs := flag.NewFlagSet("sidecar", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var a auditConfig
	addAuditFlags(fs, &a)
	if err := fs.Parse(args); err != nil {
		tb.Fatal(err)
	}
	if err := a.check(); err != nil {
		tb.Fatal(err)
	}
	return a
}

// TestSidecarAuditSyslogAndTable: a sidecar started with --audit-syslog and --audit-table
// sends each audit record to both: an admin API change arrives at the syslog socket as an
// RFC 5424 message, and in the node's audit.audit_log, written over the node session.
func TestSidecarAuditSyslogAndTable(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "log.sock")
	pc, err := net.ListenPacket("unixgram", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	st := mustStack(t, stackConfig{Audit: mustAuditFlags(t, "--audit-syslog", "unix://"+sock, "--audit-table")})
	const op = "POST /storage_service/slow_query?enable=true&threshold=1000"
	resp, err := http.Post(st.Admin+"/storage_service/slow_query?enable=true&threshold=1000", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST slow_query: %s", resp.Status)
	}

	pc.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 64<<10)
	for {
		n, _, err := pc.ReadFrom(buf)
		if err != nil {
			t.Fatalf("no syslog message with %q: %v", op, err)
		}
		msg := string(buf[:n])
		head, body, _ := strings.Cut(msg, " - {")
		var r audit.Record
		if err := json.Unmarshal([]byte("{"+body), &r); err != nil || r.Operation != op {
			continue
		}
		if !strings.HasPrefix(head, "<85>1 ") || !strings.Contains(head, " tracecar-audit ") || r.Category != "ADMIN" {
			t.Errorf("syslog message %q; want <85>1 (authpriv.notice), APP-NAME tracecar-audit, an ADMIN record", msg)
		}
		break
	}

	host, port, _ := net.SplitHostPort(st.Node)
	c := gocql.NewCluster(host)
	c.Port = atoi(t, port)
	c.DisableInitialHostLookup = true
	s, err := c.CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var category, node string
		var ip net.IP
		err := s.Query(`SELECT category, node FROM audit.audit_log WHERE operation = ? ALLOW FILTERING`, op).Scan(&category, &ip)
		if err == nil {
			node = ip.String()
			if category != "ADMIN" || node != host {
				t.Errorf("audit.audit_log row: category %s, node %s; want ADMIN, %s", category, node, host)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no row for %q in audit.audit_log: %v", op, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAuditSyslogFlagErrors: a bad --audit-syslog is a usage error naming the flag and the
// forms allowed.
func TestAuditSyslogFlagErrors(t *testing.T) {
	for _, v := range []string{"/dev/log", "udp://127.0.0.1", "tcp://h:514?facility=nope", "http://h:1"} {
		var stdout, stderr bytes.Buffer
		if got := run(context.Background(), []string{"sidecar", "--audit-syslog", v}, &stdout, &stderr); got != exitUsage {
			t.Errorf("--audit-syslog %s: exit %d; want %d (stderr %q)", v, got, exitUsage, stderr.String())
		}
		if !strings.Contains(stderr.String(), "--audit-syslog") || !strings.Contains(stderr.String(), audit.SyslogForms) {
			t.Errorf("--audit-syslog %s: stderr %q; want the flag and the forms allowed", v, stderr.String())
		}
	}
}

// TestSidecarAuditSyslogFailureInReadyz: with the syslog daemon gone, /readyz says the
// syslog sink is failing and why; once it is back, the record held arrives and /readyz is
// ready again.
func TestSidecarAuditSyslogFailureInReadyz(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "log.sock")
	pc, err := net.ListenPacket("unixgram", sock)
	if err != nil {
		t.Fatal(err)
	}
	st := mustStack(t, stackConfig{Audit: mustAuditFlags(t, "--audit-syslog", "unixgram://"+sock)})
	pc.Close()
	os.Remove(sock)
	post := func(path string) {
		t.Helper()
		resp, err := http.Post(st.Admin+path, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	readyz := func() (int, string) {
		t.Helper()
		resp, err := http.Get(st.Admin + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	post("/storage_service/slow_query?enable=true&threshold=1000")
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body := readyz()
		if code == http.StatusServiceUnavailable && strings.Contains(body, "syslog") && strings.Contains(body, sock) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz with the syslog daemon gone: %d %q; want 503 naming the syslog sink and its socket", code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}

	pc, err = net.ListenPacket("unixgram", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	pc.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 64<<10)
	n, _, err := pc.ReadFrom(buf)
	if err != nil || !strings.Contains(string(buf[:n]), "slow_query?enable=true") {
		t.Fatalf("after the daemon came back: %q, %v; want the record held while it was gone", buf[:n], err)
	}
	for {
		code, body := readyz()
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatalf("/readyz once the daemon is back: %d %q; want 200", code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
