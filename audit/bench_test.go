package audit

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// BenchmarkAddToFile is the cost a request pays to audit one record to a file (Add:
// counting, the queue), with the writer's work (encoding, write(2)) on its own goroutine
// as it runs in the sidecar, and the fsync every second.
func BenchmarkAddToFile(b *testing.B) {
	f, err := NewFile(FileConfig{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	l := Open(Config{Sinks: []Sink{f}, Sync: time.Second})
	r := rec(1)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l.Add(r)
		}
	})
	b.StopTimer()
	if err := l.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAppendJSON and BenchmarkMarshalJSON compare the file sink's encoder with
// encoding/json's, per record.
func BenchmarkAppendJSON(b *testing.B) {
	r := rec(1)
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		buf = r.AppendJSON(buf[:0])
	}
}

func BenchmarkMarshalJSON(b *testing.B) {
	r := rec(1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(&r); err != nil {
			b.Fatal(err)
		}
	}
}

// TestWantsAllocs: the data path's checks allocate nothing, every filter set.
func TestWantsAllocs(t *testing.T) {
	l := New(Block, 8)
	defer l.Close(context.Background())
	s, err := ParseSettings(Settings{}, map[string]string{"enable": "true", "categories": "DML,QUERY",
		"keyspaces": "shop,ks", "tables": "shop.carts,ks.customer_orders_by_day_and_region", "exclude_users": "bob"})
	if err != nil {
		t.Fatal(err)
	}
	l.Set(s)
	if !l.Wants(DML, "shop", "carts", "alice") || l.Wants(DML, "shop", "orders", "alice") {
		t.Fatal("the filters do not hold")
	}
	if n := testing.AllocsPerRun(1000, func() {
		_ = l.Enabled() && l.Wants(DML, "shop", "carts", "alice") && l.Wants(QUERY, "ks", "customer_orders_by_day_and_region", "alice")
	}); n != 0 {
		t.Errorf("Enabled and Wants: %v allocs; want 0", n)
	}
}

// TestAddAllocs: adding a record allocates nothing on the request's goroutine.
func TestAddAllocs(t *testing.T) {
	c := &countingSink{}
	l := Open(Config{Sinks: []Sink{c}, Queue: 1 << 16})
	defer l.Close(context.Background())
	r := rec(1)
	if n := testing.AllocsPerRun(1000, func() { l.Add(r) }); n != 0 {
		t.Errorf("Add: %v allocs; want 0", n)
	}
}

// BenchmarkEncoder compares the file sink's encoder with AppendJSON on a run of records
// as loadcheck's write workload gives them: the same strings, times microseconds apart.
func BenchmarkEncoder(b *testing.B) {
	r := Record{EventTime: time.Date(2026, 12, 6, 21, 0, 0, 0, time.Local), Node: "127.0.0.1:9042",
		Source: "127.0.0.1:51950", Category: "DML", Consistency: "LOCAL_ONE", Keyspace: "keyspace1", Table: "standard1",
		Operation: `INSERT INTO keyspace1.standard1 (key, "C0", "C1", "C2", "C3", "C4") VALUES (?, ?, ?, ?, ?, ?)`}
	for _, bm := range []struct {
		name string
		enc  func(e *encoder, b []byte, r *Record) []byte
	}{
		{"AppendJSON", func(_ *encoder, b []byte, r *Record) []byte { return r.AppendJSON(b) }},
		{"encoder", (*encoder).append},
	} {
		b.Run(bm.name, func(b *testing.B) {
			var e encoder
			buf := make([]byte, 0, 512)
			b.ReportAllocs()
			for b.Loop() {
				r.EventTime = r.EventTime.Add(3 * time.Microsecond)
				buf = bm.enc(&e, buf[:0], &r)
			}
		})
	}
}
