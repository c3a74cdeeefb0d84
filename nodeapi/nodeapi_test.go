package nodeapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/logs"
	"github.com/tracecar/tracecar/node"
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
			fail(404, "java.lang.IllegalArgumentException", fmt.Sprintf("No operation %v found on MBean %s", req["operation"], StorageServiceMBean))
			return
		}
		name, _ := args[0].(string)
		level, _ := args[1].(string)
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

func TestJolokiaRequestsFollowTheProtocol(t *testing.T) {
	f := &fakeJolokia{levels: map[string]string{"org.apache.cassandra": "INFO", "ROOT": "INFO"}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c := mustClient(t, KindJolokia, srv.URL+"/jolokia/")
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
	want := []string{
		`{"type":"write","mbean":"org.apache.cassandra.db:type=StorageService","attribute":"TraceProbability","value":0.01}`,
		`{"type":"read","mbean":"org.apache.cassandra.db:type=StorageService","attribute":"TraceProbability"}`,
		`{"type":"write","mbean":"org.apache.cassandra.db:type=StorageService","attribute":"TraceProbability","value":0}`,
		`{"type":"exec","mbean":"org.apache.cassandra.db:type=StorageService","operation":"setLoggingLevel","arguments":["org.apache.cassandra.db","DEBUG"]}`,
		`{"type":"read","mbean":"org.apache.cassandra.db:type=StorageService","attribute":"LoggingLevels"}`,
		`{"type":"read","mbean":"org.apache.cassandra.db:type=StorageService","attribute":"LoggingLevels"}`,
	}
	if got := strings.Join(f.bodies, "\n"); got != strings.Join(want, "\n") {
		t.Fatalf("request bodies:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
}

func TestJolokiaErrorStatusInBody(t *testing.T) {
	f := &fakeJolokia{levels: map[string]string{}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c := mustClient(t, KindJolokia, srv.URL)
	// An exec of the getter fails as on a real agent: JMX has no such operation.
	err := c.jolokia(context.Background(), jolokiaRequest{Type: "exec", MBean: StorageServiceMBean, Operation: "getTraceProbability"}, nil)
	var e *Error
	if !errors.As(err, &e) || e.Status != 404 || !strings.Contains(e.Message, "No operation getTraceProbability") {
		t.Fatalf("got %v; want the agent's 404 in the body as an *Error", err)
	}
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
	api := admin.New(admin.Config{}, tr, reg)
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
