package reliability

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/sidecar"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/cqlsink"
)

// TestDeadSinks records every request (threshold 0) while the CQL sink's node is dead and
// the OTLP endpoint is a black hole (it accepts connections and never answers). No
// request fails, and every session recorded and not delivered to the dead CQL sink is
// counted, as dropped (queue full) or as a write error. The OTel sink hands spans to the
// SDK's batch processor, which drops them on its own when the exporter hangs; those drops
// are not in tracecar's counters yet, so only the figures are logged for it.
func TestDeadSinks(t *testing.T) {
	const requests = 2000
	n := startNode(t, node.Config{})
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close() // nothing listens there: connections are refused
	hole, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hole.Close()
	go func() { // accept and hold every connection, never answering
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := hole.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	otel, err := tracing.NewOTelSink(t.Context(), tracing.OTelOptions{Endpoint: "http://" + hole.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	conn := &cqlsink.Connector{Addr: deadAddr}
	defer conn.Close()
	tr := tracing.New(tracing.Options{
		Sinks:     []tracing.Sink{cqlsink.LazyTableSink(conn, func() int64 { return 60 }), otel},
		QueueSize: 64,
	})
	if err := tr.SetConfig(tracing.Config{Enable: true, ThresholdMicros: 0, TTLSeconds: 60}); err != nil {
		t.Fatal(err)
	}
	sc := startSidecar(t, sidecar.Config{NodeAddr: n.addr}, tr)
	s := session(t, sc.addr)
	failed := 0
	for range requests {
		var v string
		if err := s.Query("SELECT release_version FROM system.local").Scan(&v); err != nil {
			failed++
		}
	}
	// The driver has its last answer before the sidecar has recorded that request's
	// session (that follows the write to the client), and a session recorded once Close
	// has begun reaches only the ring. So the driver leaves, and the sidecar's connections
	// end, before the tracer closes: every session is recorded by then.
	s.Close()
	deadline := time.Now().Add(testTimeout)
	for sc.Stats().Connections != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("sidecar connections still open %v after the driver closed", testTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	closeErr := tr.Close(ctx) // drains what it can; what is left counts as dropped
	st := tr.Stats()
	t.Logf("FIGURE dead sinks: %d requests through the sidecar, %d failed; sessions recorded %d; cql sink: dropped %d, write errors %d, delivered 0; otel (black hole): dropped at its queue %d, errors %d; Close: %v",
		requests, failed, st.SlowSessions, st.Dropped["cql"], st.Errors["cql"], st.Dropped["otel"], st.Errors["otel"], closeErr)
	if failed != 0 {
		t.Errorf("%d of %d requests failed while the sinks were dead", failed, requests)
	}
	if st.SlowSessions < requests {
		t.Errorf("recorded %d sessions, want at least %d (threshold 0)", st.SlowSessions, requests)
	}
	// The OTLP receiver never answers: every session is lost, and each one is counted,
	// either at the sink's queue or as a span the exporter could not deliver.
	ex := otel.ExportStats()
	t.Logf("FIGURE dead OTLP endpoint: %d sessions; dropped at the sink queue %d, spans lost in export or at shutdown %d, exported %d",
		st.SlowSessions, st.Dropped["otel"], ex.SpansDropped, ex.SpansExported)
	if ex.SpansExported != 0 {
		t.Errorf("%d spans exported to a receiver that never answers", ex.SpansExported)
	}
	if got := st.Dropped["otel"] + st.Errors["otel"] + ex.SpansDropped; got != st.SlowSessions {
		t.Errorf("otel sink: dropped at its queue %d + write errors %d + spans lost %d = %d, want every recorded session (%d): some went uncounted",
			st.Dropped["otel"], st.Errors["otel"], ex.SpansDropped, got, st.SlowSessions)
	}
	if got := st.Dropped["cql"] + st.Errors["cql"]; got != st.SlowSessions {
		t.Errorf("cql sink: dropped %d + errors %d = %d, want every recorded session (%d): some went uncounted",
			st.Dropped["cql"], st.Errors["cql"], got, st.SlowSessions)
	}
}
