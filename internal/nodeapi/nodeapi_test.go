package nodeapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/internal/testkit/drivertest"
	"github.com/tracecar/tracecar/tracing"
)

// fakeJolokia is an in-process stand-in for a Jolokia agent in front of Cassandra's
// StorageService MBean. It follows Jolokia's documented JSON protocol: a POST of one
// request object to the agent URL, answered with HTTP 200 and
// {"request":{…},"value":…,"timestamp":…,"status":200}, or with "status", "error_type" and
// "error" on failure. As JMX does for a standard MBean, it exposes the getter/setter pair
// of TraceProbability as an attribute only, and setLoggingLevel as an operation.
type fakeJolokia struct {
	mu     sync.Mutex
	prob   float64
	levels map[string]string
	bodies []string // every request body, as received
}

func (f *fakeJolokia) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bodies = append(f.bodies, string(body))
	w.Header().Set("Content-Type", "text/plain;charset=utf-8") // what the agent sends
	var req map[string]any
	fail := func(status int, typ, msg string) {
		json.NewEncoder(w).Encode(map[string]any{"request": req, "status": status, "error_type": typ, "error": typ + " : " + msg})
	}
	if r.Method != http.MethodPost {
		fail(400, "java.lang.IllegalArgumentException", "only POST in this fake")
		return
	}
	if err := json.Unmarshal(body, &req); err != nil {
		fail(400, "java.lang.IllegalArgumentException", "Invalid JSON request")
		return
	}
	if req["mbean"] != StorageServiceMBean {
		fail(404, "javax.management.InstanceNotFoundException", fmt.Sprint(req["mbean"]))
		return
	}
	ok := func(v any) {
		json.NewEncoder(w).Encode(map[string]any{"request": req, "value": v, "timestamp": time.Now().Unix(), "status": 200})
	}
	switch req["type"] {
	case "read":
		switch req["attribute"] {
		case "TraceProbability":
			ok(f.prob)
		case "LoggingLevels":
			ok(f.levels)
		default:
			fail(404, "javax.management.AttributeNotFoundException", fmt.Sprintf("No such attribute: %v", req["attribute"]))
		}
	case "write":
		v, isNum := req["value"].(float64)
		if req["attribute"] != "TraceProbability" || !isNum {
			fail(400, "java.lang.IllegalArgumentException", "bad write")
			return
		}
		old := f.prob
		f.prob = v
		ok(old) // a write answers the old value
	case "exec":
		args, _ := req["arguments"].([]any)
		if req["operation"] != "setLoggingLevel" || len(args) != 2 {
			fail(400, "java.lang.IllegalArgumentException", fmt.Sprintf("No operation %v found on MBean %s", req["operation"], StorageServiceMBean))
			return
		}
		name, _ := args[0].(string)
		level, _ := args[1].(string)
		if !strings.Contains(" TRACE DEBUG INFO WARN ERROR OFF ", " "+level+" ") {
			fail(500, "java.lang.IllegalArgumentException", "invalid level "+level)
			return
		}
		f.levels[name] = level
		ok(nil)
	default:
		fail(400, "java.lang.IllegalArgumentException", fmt.Sprintf("Unknown type %v", req["type"]))
	}
}

func mustClient(tb testing.TB, kind, url string) *Client {
	tb.Helper()
	c, err := New(Config{Kind: kind, URL: url})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// jolokiaWant are the request bodies that checkJolokia sends, as Jolokia's protocol
// documents them.
var jolokiaWant = []string{
	`{"type":"write","mbean":"org.apache.cassandra.db:type=StorageService","attribute":"TraceProbability","value":0.01}`,
	`{"type":"read","mbean":"org.apache.cassandra.db:type=StorageService","attribute":"TraceProbability"}`,
	`{"type":"write","mbean":"org.apache.cassandra.db:type=StorageService","attribute":"TraceProbability","value":0}`,
	`{"type":"exec","mbean":"org.apache.cassandra.db:type=StorageService","operation":"setLoggingLevel","arguments":["org.apache.cassandra.db","DEBUG"]}`,
	`{"type":"read","mbean":"org.apache.cassandra.db:type=StorageService","attribute":"LoggingLevels"}`,
	`{"type":"read","mbean":"org.apache.cassandra.db:type=StorageService","attribute":"LoggingLevels"}`,
}

// checkJolokia drives the adapter through a StorageService that starts with trace
// probability 0 and loggers ROOT and org.apache.cassandra at INFO, and checks the
// answers. bodies returns the request bodies the agent received.
func checkJolokia(t *testing.T, url string, bodies func() []string) {
	t.Helper()
	c := mustClient(t, KindJolokia, url)
	ctx := context.Background()
	if err := c.SetTraceProbability(ctx, 0.01); err != nil {
		t.Fatal(err)
	}
	p, err := c.TraceProbability(ctx)
	if err != nil || p != 0.01 {
		t.Fatalf("TraceProbability = %v, %v; want 0.01", p, err)
	}
	if err := c.SetTraceProbability(ctx, 0); err != nil { // 0 must be sent, not omitted
		t.Fatal(err)
	}
	if err := c.SetLevel(ctx, "org.apache.cassandra.db", "debug"); err != nil {
		t.Fatal(err)
	}
	names, err := c.Loggers(ctx)
	if err != nil || strings.Join(names, ",") != "ROOT,org.apache.cassandra,org.apache.cassandra.db" {
		t.Fatalf("Loggers = %v, %v", names, err)
	}
	l, err := c.Level(ctx, "org.apache.cassandra.db")
	if err != nil || l != "debug" {
		t.Fatalf("Level = %q, %v; want debug", l, err)
	}
	if got := strings.Join(bodies(), "\n"); got != strings.Join(jolokiaWant, "\n") {
		t.Fatalf("request bodies:\n%s\nwant:\n%s", got, strings.Join(jolokiaWant, "\n"))
	}
	// The getter and setter of TraceProbability are not operations to JMX: an exec of
	// either fails with the agent's 400 in the body (the HTTP status is 200).
	for _, op := range []string{"getTraceProbability", "setTraceProbability"} {
		r := jolokiaRequest{Type: "exec", MBean: StorageServiceMBean, Operation: op}
		if op == "setTraceProbability" {
			r.Arguments = []any{0.5}
		}
		var e *Error
		if err := c.jolokia(ctx, r, nil); !errors.As(err, &e) || e.Status != 400 || !strings.Contains(e.Message, "No operation "+op) {
			t.Fatalf("exec %s: got %v; want the agent's 400 \"No operation %s\"", op, err, op)
		}
	}
	if err := c.SetLevel(ctx, "x", "loud"); err == nil {
		t.Fatal("setLoggingLevel with level LOUD: got nil; want the MBean's error")
	}
}

func TestJolokiaFake(t *testing.T) {
	f := &fakeJolokia{levels: map[string]string{"org.apache.cassandra": "INFO", "ROOT": "INFO"}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	checkJolokia(t, srv.URL+"/jolokia/", func() []string {
		f.mu.Lock()
		defer f.mu.Unlock()
		return append([]string(nil), f.bodies...)
	})
	c := mustClient(t, KindJolokia, srv.URL)
	var e *Error
	if _, err := c.Level(context.Background(), "nope"); !errors.As(err, &e) || !e.Rejected() {
		t.Fatalf("Level of an unknown logger: got %v; want a rejection", err)
	}
	if err := c.SetSlowQuery(context.Background(), true, false, 0, 0); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("SetSlowQuery: got %v; want ErrUnsupported", err)
	}
}

// startEmbeddedNodeAPI serves a real embedded node's API, as `tracecar node --api` does.
func startEmbeddedNodeAPI(tb testing.TB) (*node.Server, *logs.Registry, string) {
	tb.Helper()
	var out bytes.Buffer
	reg, err := logs.New(logs.Config{Writer: &out})
	if err != nil {
		tb.Fatal(err)
	}
	srv := node.New(node.Config{Logger: reg.Logger(logs.Node)})
	tr := admin.ConfigOnly(func() tracing.Config {
		c := tracing.DefaultConfig()
		c.Probability = srv.TraceProbability()
		return c
	}, func(c tracing.Config) error { return srv.SetTraceProbability(c.Probability) })
	api := admin.New(admin.Config{Tracer: tr, Loggers: reg})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); api.Serve(ctx, ln) }()
	tb.Cleanup(func() { cancel(); <-done; reg.Close() })
	return srv, reg, "http://" + ln.Addr().String()
}

func TestTracecarNodeAPI(t *testing.T) {
	srv, reg, url := startEmbeddedNodeAPI(t)
	c := mustClient(t, KindTracecar, url)
	ctx := context.Background()
	if err := c.SetTraceProbability(ctx, 0.25); err != nil {
		t.Fatal(err)
	}
	if got := srv.TraceProbability(); got != 0.25 {
		t.Fatalf("node probability %v; want 0.25", got)
	}
	if p, err := c.TraceProbability(ctx); err != nil || p != 0.25 {
		t.Fatalf("TraceProbability = %v, %v", p, err)
	}
	if err := c.SetLevel(ctx, "node", "debug"); err != nil {
		t.Fatal(err)
	}
	if l, _ := reg.Level("node"); l != "debug" {
		t.Fatalf("node logger at %q; want debug", l)
	}
	names, err := c.Loggers(ctx)
	if err != nil || !strings.Contains(strings.Join(names, ","), "node") {
		t.Fatalf("Loggers = %v, %v", names, err)
	}
	var e *Error
	if err := c.SetLevel(ctx, "nope", "debug"); !errors.As(err, &e) || !e.Rejected() || !strings.Contains(e.Message, "unknown logger") {
		t.Fatalf("unknown logger: got %v; want the node's 400", err)
	}
	if err := c.SetSlowQuery(ctx, true, false, 0, 0); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("SetSlowQuery: got %v; want ErrUnsupported", err)
	}
}

func TestNewValidates(t *testing.T) {
	for _, cfg := range []Config{{Kind: "mysql", URL: "http://x"}, {Kind: KindScylla, URL: "x:10000"}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) = nil error", cfg)
		}
	}
}

// TestJolokiaRealAgent runs checkJolokia against a real Jolokia agent: Debian's
// libjolokia-core-java serving testdata/jolokia/StorageServiceStandIn.java, a stand-in
// for Cassandra's StorageService MBean with its signatures, in a JVM. A recording proxy in
// front of it keeps the request bodies. It needs javac and the jars; it is skipped
// without them unless TRACECAR_REQUIRE_DRIVERS=1 (as .ci/run sets, after installing them).
func TestJolokiaRealAgent(t *testing.T) {
	jars := []string{"/usr/share/java/jolokia-core.jar", "/usr/share/java/json-simple.jar"}
	javac := drivertest.RequireTool(t, "javac", "default-jdk-headless")
	java := drivertest.RequireTool(t, "java", "default-jdk-headless")
	for _, j := range jars {
		if _, err := os.Stat(j); err != nil {
			drivertest.Missing(t, j+" (Debian package libjolokia-core-java)")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	cp := strings.Join(jars, ":")
	if out, err := exec.CommandContext(ctx, javac, "-nowarn", "-d", dir, "-cp", cp, "testdata/jolokia/StorageServiceStandIn.java").CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	cmd := exec.CommandContext(ctx, java, "-Xmx64m", "-cp", dir+":"+cp, "StorageServiceStandIn")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close() // the stand-in exits when its stdin closes
		if err := cmd.Wait(); err != nil {
			t.Logf("stand-in: %v", err)
		}
	}()
	var port string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "LISTENING "); ok {
			port = p
			break
		}
	}
	if port == "" {
		t.Fatalf("the stand-in never said where it listens: %v", sc.Err())
	}
	go io.Copy(io.Discard, stdout)

	agent, err := url.Parse("http://127.0.0.1:" + port + "/jolokia")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var bodies []string
	proxy := httputil.NewSingleHostReverseProxy(agent)
	rec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
		r.URL.Path = "" // the proxy appends the path to the agent's /jolokia
		proxy.ServeHTTP(w, r)
	}))
	defer rec.Close()
	checkJolokia(t, rec.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), bodies[:min(len(bodies), len(jolokiaWant))]...)
	})
}
