package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/tracing"
)

// mustStack starts an embedded node and a sidecar for a test, and stops them after it.
func mustStack(tb testing.TB, cfg stackConfig) *stack {
	tb.Helper()
	cfg.Listen, cfg.Admin = "127.0.0.1:0", "127.0.0.1:0"
	if cfg.RingSize == 0 {
		cfg.RingSize = 1000
	}
	reg, err := logs.New(logs.Config{Writer: io.Discard})
	if err != nil {
		tb.Fatal(err)
	}
	st, err := startStack(context.Background(), cfg, reg, io.Discard)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := st.stop(); err != nil {
			tb.Errorf("stop: %v", err)
		}
		reg.Close()
	})
	return st
}

// TestDeadOTLPCollector traces every request in full mode while the OTLP endpoint refuses
// connections: clients see no error and no stall, and the sessions still reach the ring.
func TestDeadOTLPCollector(t *testing.T) {
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + dead.Addr().String()
	dead.Close() // nothing listens there any more
	st := mustStack(t, stackConfig{OTLPEndpoint: endpoint, RingSize: 5000})
	if err := st.tracer.SetConfig(tracing.Config{Enable: true, ThresholdMicros: 0, TTLSeconds: 60}); err != nil {
		t.Fatal(err)
	}
	s := mustSession(t, st.Sidecar)
	defer s.Close()
	const n = 2000
	for i := 0; i < n; i++ {
		var rv string
		if err := s.Query("SELECT release_version FROM system.local WHERE key = ?", "local").Scan(&rv); err != nil {
			t.Fatalf("query %d with a dead collector: %v", i, err)
		}
	}
	if got := len(st.tracer.SlowLog(n)); got < n {
		t.Errorf("ring has %d sessions; want at least %d", got, n)
	}
}

// TestManyConnections opens hundreds of client connections at once through the sidecar,
// each doing a handshake and a query, and then checks that a driver still works.
func TestManyConnections(t *testing.T) {
	st := mustStack(t, stackConfig{})
	const conns = 500
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if err := handshakeAndQuery(st.Sidecar, int16(i)); err != nil {
				errs <- fmt.Errorf("connection %d: %w", i, err)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	s := mustSession(t, st.Sidecar)
	defer s.Close()
	var rv string
	if err := s.Query("SELECT release_version FROM system.local").Scan(&rv); err != nil {
		t.Fatalf("driver after %d connections: %v", conns, err)
	}
}

// handshakeAndQuery speaks raw protocol v4: STARTUP, then one QUERY, and reads both answers.
func handshakeAndQuery(addr string, stream int16) error {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	out := cql.AppendFrame(nil, cql.Header{Version: cql.V4, Stream: 0}, cql.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0"}})
	out = cql.AppendFrame(out, cql.Header{Version: cql.V4, Stream: stream}, cql.Query{
		Query: "SELECT cluster_name FROM system.local", Params: cql.QueryParams{Consistency: cql.One}})
	if _, err := c.Write(out); err != nil {
		return err
	}
	for want := 0; want < 2; want++ {
		hdr := make([]byte, cql.HeaderSize)
		if _, err := io.ReadFull(c, hdr); err != nil {
			return fmt.Errorf("read response %d: %w", want, err)
		}
		h, err := cql.ParseHeader(hdr)
		if err != nil {
			return err
		}
		if _, err := io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint32(hdr[5:9]))); err != nil {
			return err
		}
		if h.Opcode == cql.OpError {
			return fmt.Errorf("response %d is an ERROR", want)
		}
	}
	return nil
}
