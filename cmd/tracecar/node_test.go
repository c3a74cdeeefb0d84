package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"
)

// TestNodeCommand starts `tracecar node`, changes its logger level and trace probability
// through its API, and checks that a query then leaves a trace session behind.
func TestNodeCommand(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"node", "--listen", "127.0.0.1:0", "--api", "127.0.0.1:0", "--log-file", t.TempDir() + "/node.log"}, pw, io.Discard)
		pw.Close()
	}()
	cqlRE := regexp.MustCompile(`CQL on (\S+)`)
	apiRE := regexp.MustCompile(`API on (\S+)`)
	var cqlAddr, api string
	sc := bufio.NewScanner(pr)
	for (cqlAddr == "" || api == "") && sc.Scan() {
		if m := cqlRE.FindStringSubmatch(sc.Text()); m != nil {
			cqlAddr = m[1]
		}
		if m := apiRE.FindStringSubmatch(sc.Text()); m != nil {
			api = m[1]
		}
	}
	if cqlAddr == "" || api == "" {
		cancel()
		t.Fatalf("no address lines from tracecar node (exit %d)", <-done)
	}
	go io.Copy(io.Discard, pr)

	call := func(method, path, want string) {
		t.Helper()
		req, _ := http.NewRequest(method, api+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != want {
			t.Fatalf("%s %s: got %d %q; want 200 %q", method, path, resp.StatusCode, body, want)
		}
	}
	call("GET", "/system/logger/node", `"info"`)
	call("POST", "/system/logger/node?level=debug", "")
	call("GET", "/system/logger/node", `"debug"`)
	call("POST", "/storage_service/trace_probability?probability=1", "")
	call("GET", "/storage_service/trace_probability", "1")

	host, port, _ := strings.Cut(cqlAddr, ":")
	c := gocql.NewCluster(host)
	c.Port = atoi(t, port)
	c.Timeout = 10 * time.Second
	s, err := c.CreateSession()
	if err != nil {
		t.Fatalf("gocql to the node: %v", err)
	}
	defer s.Close()
	var n int
	if err := s.Query("SELECT count(*) FROM system_traces.sessions").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Errorf("with trace probability 1, system_traces.sessions is empty")
	}

	cancel()
	mustExitOK(t, done)
}

// TestNodeGCPercent checks that the node runs with GOGC 400 unless the environment sets
// GOGC, which wins.
func TestNodeGCPercent(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	t.Setenv("GOGC", "")
	os.Unsetenv("GOGC")
	nodeGC()
	if got := debug.SetGCPercent(100); got != nodeGCPercent {
		t.Errorf("GC percent %d without GOGC; want %d", got, nodeGCPercent)
	}
	t.Setenv("GOGC", "150")
	debug.SetGCPercent(150)
	nodeGC()
	if got := debug.SetGCPercent(100); got != 150 {
		t.Errorf("GC percent %d with GOGC=150; want the environment's 150", got)
	}
}

// TestNodeMaterializedViewsFlag: `tracecar node` has materialized views by default, as
// ScyllaDB; --materialized-views=false refuses them with stock Cassandra 4.1's message.
func TestNodeMaterializedViewsFlag(t *testing.T) {
	for _, tc := range []struct {
		flag, want string
	}{
		{"", ""},
		{"--materialized-views=false", "Materialized views are disabled. Enable in cassandra.yaml to use."},
	} {
		t.Run("views"+tc.flag, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			pr, pw := io.Pipe()
			done := make(chan int, 1)
			args := []string{"node", "--listen", "127.0.0.1:0", "--api", "", "--log-file", t.TempDir() + "/node.log"}
			if tc.flag != "" {
				args = append(args, tc.flag)
			}
			go func() {
				done <- run(ctx, args, pw, io.Discard)
				pw.Close()
			}()
			cqlRE := regexp.MustCompile(`CQL on (\S+)`)
			var cqlAddr string
			sc := bufio.NewScanner(pr)
			for cqlAddr == "" && sc.Scan() {
				if m := cqlRE.FindStringSubmatch(sc.Text()); m != nil {
					cqlAddr = m[1]
				}
			}
			if cqlAddr == "" {
				cancel()
				t.Fatalf("no address line from tracecar node (exit %d)", <-done)
			}
			go io.Copy(io.Discard, pr)
			host, port, _ := strings.Cut(cqlAddr, ":")
			c := gocql.NewCluster(host)
			c.Port = atoi(t, port)
			c.Timeout = 10 * time.Second
			s, err := c.CreateSession()
			if err != nil {
				t.Fatalf("gocql to the node: %v", err)
			}
			for _, q := range []string{
				"CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
				"CREATE TABLE ks.t (k int, c int, PRIMARY KEY (k, c))",
			} {
				if err := s.Query(q).Exec(); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			err = s.Query("CREATE MATERIALIZED VIEW ks.v AS SELECT * FROM ks.t WHERE k IS NOT NULL AND c IS NOT NULL PRIMARY KEY (c, k)").Exec()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("CREATE MATERIALIZED VIEW: got %q; want %q", got, tc.want)
			}
			s.Close()
			cancel()
			mustExitOK(t, done)
		})
	}
}
