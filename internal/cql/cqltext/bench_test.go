package cqltext

import "testing"

const benchQuery = "INSERT INTO keyspace1.standard1 (key, \"C0\", \"C1\") VALUES (0x0102, 'some text', [1, 2, 3]) USING TTL 86400"

// BenchmarkNext reads every token of a statement with Next.
func BenchmarkNext(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchQuery)))
	for b.Loop() {
		for i := 0; i < len(benchQuery); {
			i = Next(benchQuery, i).End
		}
	}
}

// BenchmarkScanner reads every token of a statement with a Scanner.
func BenchmarkScanner(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchQuery)))
	for b.Loop() {
		s := NewScanner(benchQuery)
		for t := s.Next(); t.Kind != EOF; t = s.Next() {
		}
	}
}
