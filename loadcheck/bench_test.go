package loadcheck

import (
	"bytes"
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
func BenchmarkCQLWrite(b *testing.B) { benchWrite(b, cqlDriver{}) }

// BenchmarkWireWrite runs the write operation of loadcheck's own CQL client against the
// embedded node in this process.
func BenchmarkWireWrite(b *testing.B) { benchWrite(b, wireDriver{}) }

// benchWrite runs the built-in write operation through driver d against the embedded node
// in this process.
func benchWrite(b *testing.B, d driver) {
	addr := mustNode(b)
	cfg := &Config{CL: "ONE", Timeout: DefaultTimeout, Connections: 1, Compression: "none"}
	s, err := d.connect(context.Background(), cfg, addr)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := createSchema(context.Background(), s); err != nil {
		b.Fatal(err)
	}
	wl, _ := parseWorkload(&Config{Workload: "write", Pop: "uniform(1..1000)"})
	op := newOp(context.Background(), s, 0, wl)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := op(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// benchProfile is a profile of a write (two rows of one partition, in an unlogged batch)
// and a read of one partition.
const benchProfile = `keyspace: kb
keyspace_definition: |
  CREATE KEYSPACE kb WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}
table: t
table_definition: CREATE TABLE t (k int, c int, v text, PRIMARY KEY (k, c))
columnspec:
  - name: c
    cluster: fixed(4)
  - name: v
    size: fixed(16)
insert:
  partitions: fixed(1)
  select: fixed(2)/4
  batchtype: unlogged
queries:
  read:
    cql: SELECT * FROM t WHERE k = ?
    fields: samerow
`

// BenchmarkProfileOp runs a profile's mix of insert and read through each client against
// the embedded node in this process.
func BenchmarkProfileOp(b *testing.B) {
	addr := mustNode(b)
	for _, d := range []struct {
		name string
		d    driver
	}{{"gocql", cqlDriver{}}, {"wire", wireDriver{}}} {
		b.Run(d.name, func(b *testing.B) {
			ctx := context.Background()
			var out bytes.Buffer
			cfg := Config{CL: "ONE", Timeout: DefaultTimeout, Connections: 1, Compression: "none", Profile: mustProfileFile(b, benchProfile),
				OpsMix: "insert=1,read=1", Pop: "uniform(1..100)", Preload: 10, PageSize: 100, Concurrency: 1}
			wl, err := parseProfileWorkload(&cfg)
			if err != nil {
				b.Fatal(err)
			}
			c := &checker{cfg: &cfg, env: env{clock: newRealClock(), driver: d.d}, wl: wl, modes: []*mode{{target: addr}}, out: newPrinter(&out, false)}
			if err := c.prepareProfile(ctx); err != nil {
				b.Fatal(err)
			}
			s, err := d.d.connect(ctx, &cfg, addr)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			wl.stats = newProfileStats(wl.profile)
			op := newOp(ctx, s, 0, wl)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := op(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
