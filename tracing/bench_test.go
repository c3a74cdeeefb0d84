package tracing

import (
	"context"
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/tracecar/tracecar/internal/cql"
)

// benchFrames returns a cassandra-stress-like read: an EXECUTE of a prepared SELECT with a
// 10-byte key, and its Rows response of one row of six 34-byte columns.
func benchFrames(b testing.TB) (cql.Header, []byte, cql.Header, []byte) {
	b.Helper()
	h, f := mustRequest(b, reqHeader(42, 0), executeMsg([]byte("0123456789")), nil)
	cols := []cql.ColumnSpec{{Keyspace: "keyspace1", Table: "standard1", Name: "key", Type: cql.Simple(cql.TypeBlob)}}
	row := [][]byte{[]byte("0123456789")}
	for _, n := range []string{"C0", "C1", "C2", "C3", "C4"} {
		cols = append(cols, cql.ColumnSpec{Keyspace: "keyspace1", Table: "standard1", Name: n, Type: cql.Simple(cql.TypeBlob)})
		row = append(row, make([]byte, 34))
	}
	rows := cql.RowsResult{Metadata: cql.RowsMetadata{Flags: cql.RowsGlobalTableSpec, Columns: cols}, Rows: [][][]byte{row}}
	rh, rf := mustResponse(b, respHeader(42, 0), cql.ResponsePrefix{}, rows, nil)
	return h, f, rh, rf
}

func benchMode(b *testing.B, cfg Config) {
	tr := New(Options{})
	defer mustClose(b, tr)
	k := newCaller(tr, testClient, testCoord)
	defer k.Close()
	prepare(b, k, 1)
	mustConfig(b, tr, cfg)
	c := k.Conn
	h, f, rh, rf := benchFrames(b)
	var rq, rs cql.Frame
	one := func() {
		rq.Reset(h, f, nil)
		t := c.Begin(&rq, 0)
		if t.Events() {
			t.Sent(Now())
		}
		rs.Reset(rh, rf, nil)
		_, t = c.End(t, &rs, 0)
		c.Done(t, 0)
	}
	one() // warm up: the connection's first record and its buffer are allocated once
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		one()
	}
}

// BenchmarkOff is the per-request cost with tracing off. It must be 0 allocs/op.
func BenchmarkOff(b *testing.B) { benchMode(b, DefaultConfig()) }

// BenchmarkFastBelowThreshold is fast mode for a request that is not slow. It must be 0
// allocs/op.
func BenchmarkFastBelowThreshold(b *testing.B) {
	benchMode(b, Config{Enable: true, Fast: true, ThresholdMicros: 1e12})
}

// BenchmarkFastSlow is fast mode with every request slow (threshold 0): each is decoded
// and recorded.
func BenchmarkFastSlow(b *testing.B) { benchMode(b, Config{Enable: true, Fast: true}) }

// BenchmarkFull is full mode below the threshold: a session with events for every
// request, none recorded.
func BenchmarkFull(b *testing.B) { benchMode(b, Config{Enable: true, ThresholdMicros: 1e12}) }

// BenchmarkFullSlow is full mode with every request recorded.
func BenchmarkFullSlow(b *testing.B) { benchMode(b, Config{Enable: true}) }

// BenchmarkFastSharedClock is fast mode below the threshold as the sidecar drives it: the
// proxy reads the clock once per request and once per response for its latency metric,
// and hands those readings over, so tracing adds no clock read. It must be 0 allocs/op.
func BenchmarkFastSharedClock(b *testing.B) {
	tr := New(Options{})
	defer mustClose(b, tr)
	k := newCaller(tr, testClient, testCoord)
	defer k.Close()
	prepare(b, k, 1)
	mustConfig(b, tr, Config{Enable: true, Fast: true, ThresholdMicros: 1e12})
	c := k.Conn
	h, f, rh, rf := benchFrames(b)
	now := Now()
	var rq, rs cql.Frame
	one := func() {
		rq.Reset(h, f, nil)
		t := c.Begin(&rq, now)
		rs.Reset(rh, rf, nil)
		c.End(t, &rs, now+1000)
	}
	one()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		one()
	}
}

// BenchmarkSampled is a sampled request (probability 1) whose response carries the node's
// tracing id, which is stripped: the session is built and recorded with the node's events
// merged in, from a source that answers at once. It reports the CPU of the whole process
// per request (cpu-µs/op), the fetcher's goroutine included, besides the data path's own
// time (ns/op).
func BenchmarkSampled(b *testing.B) {
	node := &fakeNode{complete: 1, events: []Event{
		{Activity: "Parsing a statement", SourceElapsedUS: 3},
		{Activity: "Executing single-partition query", SourceElapsedUS: 20},
		{Activity: "Request complete", SourceElapsedUS: 40},
	}}
	tr := New(Options{NodeEvents: node})
	defer mustClose(b, tr)
	k := newCaller(tr, testClient, testCoord)
	defer k.Close()
	prepare(b, k, 1)
	mustConfig(b, tr, Config{Probability: 1})
	c := k.Conn
	h, f, _, _ := benchFrames(b)
	rh, orig := mustResponse(b, respHeader(42, cql.FlagTracing), cql.ResponsePrefix{TracingID: nodeID}, cql.VoidResult{}, nil)
	rf := make([]byte, len(orig))
	var rq, rs cql.Frame
	one := func() {
		rq.Reset(h, f, nil)
		t := c.Begin(&rq, 0)
		t.Sent(Now())
		copy(rf, orig) // the tracing id is stripped in place
		rs.Reset(rh, rf, nil)
		_, t = c.End(t, &rs, 0)
		c.Done(t, 0)
	}
	one()
	b.ReportAllocs()
	cpu0 := processCPU(b)
	b.ResetTimer()
	for b.Loop() {
		one()
	}
	b.StopTimer()
	if err := tr.Close(context.Background()); err != nil { // the fetcher's last sessions
		b.Fatal(err)
	}
	b.ReportMetric(float64(processCPU(b)-cpu0)/1e3/float64(b.N), "cpu-µs/op")
}

// processCPU returns the CPU time of the process so far, in ns.
func processCPU(tb testing.TB) int64 {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkSessionParams is the parameters of a recorded session for a cassandra-stress
// write: an EXECUTE of a prepared INSERT with six bound values, redacted.
func BenchmarkSessionParams(b *testing.B) {
	tr := New(Options{})
	defer mustClose(b, tr)
	tr.Statements().Put(testID, Statement{
		Query:    `INSERT INTO keyspace1.standard1 (key, "C0", "C1", "C2", "C3", "C4") VALUES (?, ?, ?, ?, ?, ?)`,
		Keyspace: "keyspace1",
	})
	values := [][]byte{make([]byte, 10)}
	for range 5 {
		values = append(values, make([]byte, 34))
	}
	body := executeMsg(values...).AppendBody(nil, cql.V4)
	b.ReportAllocs()
	for b.Loop() {
		ps := make(map[string]string, 6)
		var req cql.Request
		req.Parse(cql.OpExecute, cql.V4, body)
		if req.Err != nil {
			b.Fatal(req.Err)
		}
		tr.params(ps).request(&req)
	}
}

// BenchmarkFastCold is fast mode below the threshold as an event loop at a moderate rate
// sees it: between two requests of a connection, thousands of others (or other processes)
// ran, so its Conn and its record are no longer in the core's caches. Each request goes
// to one of coldConns connections, in an order that no prefetcher guesses; their records
// and Conns, about 40 MB, do not fit in a core's caches. What it measures is the cache
// lines that fast mode touches per request. It must be 0 allocs/op.
func BenchmarkFastCold(b *testing.B) {
	benchCold(b, Config{Enable: true, Fast: true, ThresholdMicros: 1e12})
}

// BenchmarkFullCold is BenchmarkFastCold in full mode: the cache lines that a request's
// session and its five events touch when its Conn and record are out of the caches, the
// bound of what full mode can add a request at a moderate rate. It must be 0 allocs/op.
func BenchmarkFullCold(b *testing.B) {
	benchCold(b, Config{Enable: true, ThresholdMicros: 1e12})
}

// benchCold runs requests below the threshold in mode cfg, each on one of coldConns
// connections in shuffled order (BenchmarkFastCold).
func benchCold(b *testing.B, cfg Config) {
	tr := New(Options{})
	b.Cleanup(func() { mustClose(b, tr) }) // after coldLoop's connections are closed
	mustConfig(b, tr, cfg)
	one := coldLoop(b, tr, 1<<16)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		one()
	}
}

// coldLoop opens n connections (a power of two) on tr and returns a function that runs
// one request below the threshold and its response on the next of them, in an order no
// prefetcher guesses, ending it as the sidecar does (Sent after the request's write, Done
// after the response's), so that its record goes back to its Conn. Every connection has
// run one request when it returns: its first record and buffer are allocated.
func coldLoop(tb testing.TB, tr *Tracer, n int) func() {
	tb.Helper()
	conns := make([]*Conn, n)
	for i := range conns {
		conns[i] = tr.NewConn(testClient, testCoord)
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(conns), func(i, j int) { conns[i], conns[j] = conns[j], conns[i] })
	tb.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	h, f, rh, rf := benchFrames(tb)
	now := Now()
	var rq, rs cql.Frame
	i := 0
	one := func() {
		c := conns[i&(n-1)]
		i++
		rq.Reset(h, f, nil)
		t := c.Begin(&rq, now)
		if t.Events() {
			t.Sent(now + 10)
		}
		rs.Reset(rh, rf, nil)
		_, t = c.End(t, &rs, now+1000)
		c.Done(t, now+1010)
	}
	for range n {
		one()
	}
	return one
}

// TestColdLoopAllocs asserts that a request below the threshold allocates nothing in fast
// and full mode when each goes to another of many connections: the record a request took
// goes back to its own Conn's free list once the request ends, however many connections
// ran in between (a record that is not given back makes every later request allocate).
func TestColdLoopAllocs(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"fast", Config{Enable: true, Fast: true, ThresholdMicros: 1e12}},
		{"full", Config{Enable: true, ThresholdMicros: 1e12}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(Options{})
			t.Cleanup(func() { mustClose(t, tr) })
			mustConfig(t, tr, tc.cfg)
			one := coldLoop(t, tr, 1<<10)
			if n := testing.AllocsPerRun(4<<10, one); n != 0 {
				t.Fatalf("%v allocations per request over %d connections, want 0", n, 1<<10)
			}
		})
	}
}
