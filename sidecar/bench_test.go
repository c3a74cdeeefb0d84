package sidecar

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracecar/tracecar/audit"
	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/internal/metrics"
	"github.com/tracecar/tracecar/tracing"
)

// benchNode answers every request with a RESULT Void on its stream, without allocating, and
// coalesces its writes as a real node does.
func benchNode(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := newFrameReader(c, 64<<10)
				w := bufio.NewWriterSize(c, 64<<10)
				resp := frame(cql.ResponseBit|cql.V4, 0, 0, cql.OpResult, voidBody())
				for {
					hb, err := r.Peek(cql.HeaderSize)
					if err != nil {
						return
					}
					copy(resp[2:4], hb[2:4])
					n := cql.HeaderSize + int(binary.BigEndian.Uint32(hb[5:9]))
					if _, err := r.Discard(n); err != nil {
						return
					}
					w.Write(resp)
					if !frameReady(r) {
						if w.Flush() != nil {
							return
						}
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// benchRoundTrips sends requests with up to depth in flight and reads every response;
// each b.N is one request and its response.
func benchRoundTrips(b *testing.B, addr string, depth int) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var batch []byte
	for i := range depth {
		batch = append(batch, executeFrame(int16(i))...)
	}
	r := bufio.NewReaderSize(c, 64<<10)
	// Warm up: the connection opens, buffers grow.
	roundTrip(b, c, r, batch, depth)
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; done += depth {
		n := min(depth, b.N-done)
		roundTrip(b, c, r, batch[:n*len(batch)/depth], n)
	}
}

func roundTrip(b *testing.B, c net.Conn, r *bufio.Reader, batch []byte, n int) {
	if _, err := c.Write(batch); err != nil {
		b.Fatal(err)
	}
	for range n {
		hb, err := r.Peek(cql.HeaderSize)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.Discard(cql.HeaderSize + int(binary.BigEndian.Uint32(hb[5:9]))); err != nil {
			b.Fatal(err)
		}
	}
}

// benchProxy serves p on loopback and returns its address.
func benchProxy(b *testing.B, p *Proxy) string {
	return mustProxyWith(b, p, nil).addr
}

// nopMetrics is an allocation-free Metrics, as the admin's is.
type nopMetrics struct {
	latencies, added atomic.Int64
	requests         func() map[cql.Opcode]uint64
}

func (m *nopMetrics) CountRequests(f func() map[cql.Opcode]uint64) { m.requests = f }
func (m *nopMetrics) Latency(cql.Opcode, time.Duration)            { m.latencies.Add(1) }
func (m *nopMetrics) AddedLatency(time.Duration)                   { m.added.Add(1) }
func (m *nopMetrics) Answered(a []metrics.Answer, _, _ int64) {
	m.latencies.Add(int64(len(a)))
	m.added.Add(int64(len(a)))
}
func (m *nopMetrics) ConnOpened() {}
func (m *nopMetrics) ConnClosed() {}

// BenchmarkDirect is the baseline: the client talks to the node with no proxy.
func BenchmarkDirect(b *testing.B) {
	node := benchNode(b)
	for _, depth := range []int{1, 64} {
		b.Run(depthName(depth), func(b *testing.B) { benchRoundTrips(b, node, depth) })
	}
}

// BenchmarkProxyOff is the proxy's data path with tracing off: one request and its response
// per op, through loopback TCP. It must report 0 allocs/op.
func BenchmarkProxyOff(b *testing.B) {
	node := benchNode(b)
	// The registry's "sidecar" logger at info: per-request lines are disabled by its
	// level sampler, as in production.
	reg, err := logs.New(logs.Config{Writer: io.Discard, Level: "info"})
	if err != nil {
		b.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		cfg  Config
		tr   func() *tracing.Tracer
	}{
		{name: "bare", cfg: Config{NodeAddr: node}},
		{name: "metrics+logger", cfg: Config{NodeAddr: node, Metrics: &nopMetrics{}, Logger: reg.Logger(logs.Sidecar)}},
		{name: "tracer-off", cfg: Config{NodeAddr: node}, tr: func() *tracing.Tracer { return tracing.New(tracing.Options{}) }},
		{name: "tracer-fast", cfg: Config{NodeAddr: node}, tr: func() *tracing.Tracer {
			t := tracing.New(tracing.Options{})
			t.SetConfig(tracing.Config{Enable: true, Fast: true, ThresholdMicros: 10_000_000, TTLSeconds: 1})
			return t
		}},
	} {
		for _, depth := range []int{1, 64} {
			b.Run(tt.name+"/"+depthName(depth), func(b *testing.B) {
				var tr *tracing.Tracer
				if tt.tr != nil {
					tr = tt.tr()
				}
				benchRoundTrips(b, benchProxy(b, New(tt.cfg, tr)), depth)
			})
		}
	}
}

func depthName(d int) string {
	if d == 1 {
		return "serial"
	}
	return "pipelined"
}

// BenchmarkRequestPath is the proxy's per-request work without the sockets, as both paths
// run it per frame: request (inspection, in-flight record, tracing's Begin, counters),
// taking the record, response (tracing's End, rewrites) and the notices after the writes,
// with metrics on. The difference between modes is what tracing adds per request.
func BenchmarkRequestPath(b *testing.B) {
	for _, tc := range []struct {
		name string
		cfg  tracing.Config
	}{
		{"off", tracing.DefaultConfig()},
		{"fast", tracing.Config{Enable: true, Fast: true, ThresholdMicros: 1e12}},
		{"full", tracing.Config{Enable: true, ThresholdMicros: 1e12}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			pc := newPathConn(b, tc.cfg)
			b.ReportAllocs()
			for b.Loop() {
				pc.one()
			}
		})
	}
}

// BenchmarkRequestPathAudit is BenchmarkRequestPath with tracing off and the audit log:
// off, on for AUTH, DDL and DCL only (an INSERT is not audited), and on for DML and QUERY
// to a JSON lines file (the writer's goroutine's CPU included).
func BenchmarkRequestPathAudit(b *testing.B) {
	for _, tc := range []struct {
		name string
		set  audit.Settings
	}{
		{"off", audit.Settings{}},
		{"auth-ddl-dcl", audit.Settings{Enabled: true, Categories: 1<<audit.AUTH | 1<<audit.DDL | 1<<audit.DCL}},
		{"dml-query-file", audit.Settings{Enabled: true, Categories: 1<<audit.DML | 1<<audit.QUERY}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			f, err := audit.NewFile(audit.FileConfig{Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			l := audit.Open(audit.Config{Sinks: []audit.Sink{f}})
			l.Set(tc.set)
			pc := newPathConn(b, tracing.DefaultConfig())
			pc.c.p.sh.Audit = l
			b.ReportAllocs()
			for b.Loop() {
				pc.one()
			}
			if err := l.Close(context.Background()); err != nil { // what the writer holds, in the time
				b.Fatal(err)
			}
		})
	}
}
