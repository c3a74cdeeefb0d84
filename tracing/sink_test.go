package tracing

import (
	"bytes"
	"encoding/json"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/internal/cql"
)

// syncBuffer is a bytes.Buffer safe for the sink goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

func TestSlowLogLine(t *testing.T) {
	var buf syncBuffer
	l := zerolog.New(&buf)
	tr := New(Options{SlowLog: &l})
	c := newCaller(tr, testClient, testCoord)
	prepare(t, c, 1)
	mustConfig(t, tr, Config{Enable: true, Fast: true})
	h, f := mustRequest(t, reqHeader(2, 0), executeMsg([]byte("secret")), nil)
	c.OnRequest(h, f, nil)
	rh, rf := mustResponse(t, respHeader(2, 0), cql.ResponsePrefix{}, cql.VoidResult{}, nil)
	c.OnResponse(rh, rf, nil)
	c.Close()
	mustClose(t, tr)

	var line struct {
		Message    string            `json:"message"`
		Level      string            `json:"level"`
		SessionID  string            `json:"session_id"`
		Mode       string            `json:"mode"`
		Command    string            `json:"command"`
		Parameters map[string]string `json:"parameters"`
	}
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("slowlog line %q: %v", buf.Bytes(), err)
	}
	if line.Message != "slow query" || line.Level != "info" || line.Mode != "fast" || line.Command != "EXECUTE" {
		t.Errorf("line = %+v; want an info \"slow query\" line for a fast EXECUTE", line)
	}
	if line.Parameters["query"] != testQuery || line.Parameters["param[0]"] != "<redacted: 6 bytes>" {
		t.Errorf("parameters = %v; want the query and a redacted value", line.Parameters)
	}
	if bytes.Contains(buf.Bytes(), []byte("secret")) {
		t.Errorf("the slow log leaks a bound value: %s", buf.Bytes())
	}
	if s, ok := tr.Session(line.SessionID); !ok || s.Mode != "fast" {
		t.Errorf("the logged session id %q is not in the ring", line.SessionID)
	}
}
