package loadcheck

import (
	"context"
	"testing"
)

// BenchmarkWorkerLoop measures the scheduler's own cost per operation: clock reads, the
// schedule and recording both histograms. It allocates nothing per operation.
func BenchmarkWorkerLoop(b *testing.B) {
	for _, rate := range []struct {
		name string
		rate float64
	}{{"closed", 0}, {"fixed-rate", 1e9}} {
		b.Run(rate.name, func(b *testing.B) {
			op := func(context.Context) (int, error) { return 1, nil }
			b.ReportAllocs()
			b.ResetTimer()
			res := runPhase(context.Background(), phase{clock: newRealClock(), workers: 1, rate: rate.rate, ops: int64(b.N)}, []Op{op})
			if res.ops != int64(b.N) {
				b.Fatalf("ops = %d; want %d", res.ops, b.N)
			}
		})
	}
}

// BenchmarkKeyAndValues measures building one operation's key and column values.
func BenchmarkKeyAndValues(b *testing.B) {
	wl, err := parseWorkload(&Config{Workload: "write", Pop: "gaussian(1..1000000)"})
	if err != nil {
		b.Fatal(err)
	}
	op := newTestOpState()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		putKey(op.key, wl.pop.next(op.rng))
		fillValues(op.rng, op.cols)
	}
}

// BenchmarkCQLWrite runs the real write operation against the embedded node in this
// process. Its allocations are gocql's and the node's, not the loop's.
func BenchmarkCQLWrite(b *testing.B) {
	addr := mustNode(b)
	cfg := &Config{CL: "ONE", Timeout: DefaultTimeout, Connections: 1, Compression: "none"}
	s, err := cqlDriver{}.connect(context.Background(), cfg, addr)
	if err != nil {
		b.Fatal(err)
	}
	defer s.close()
	if err := s.createSchema(context.Background()); err != nil {
		b.Fatal(err)
	}
	wl, _ := parseWorkload(&Config{Workload: "write", Pop: "uniform(1..1000)"})
	op := s.newOp(context.Background(), 0, wl)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := op(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}
