package statements

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tracecar/tracecar/internal/cql"
)

// clock is a fake monotonic clock, in nanoseconds.
type clock struct {
	t         int64
	req, resp cql.Frame // the views call reuses, with their frames' buffers
	rb, sb    []byte
}

func (c *clock) now() int64 { return c.t }

func newStats(t *testing.T, max int) (*Stats, *clock) {
	t.Helper()
	c := &clock{t: 1}
	s := New(Options{Max: max, Now: c.now})
	s.SetEnabled(true)
	return s, c
}

func body(m cql.Message) []byte { return m.AppendBody(nil, cql.V4) }

func reqHeader(op cql.Opcode) cql.Header { return cql.Header{Version: cql.V4, Opcode: op} }

func respHeader(op cql.Opcode) cql.Header {
	return cql.Header{Version: cql.V4 | cql.ResponseBit, Opcode: op}
}

var intCol = func(name string) cql.ColumnSpec {
	return cql.ColumnSpec{Keyspace: "ks", Table: "t", Name: name, Type: cql.TypeInfo{ID: cql.TypeInt}}
}

// prepare runs a PREPARE of q through s, answered with id and a result of cols columns.
func prepare(t *testing.T, s *Stats, q string, id string, cols int) {
	t.Helper()
	tk := s.Request(cql.NewFrame(reqHeader(cql.OpPrepare), body(cql.Prepare{Query: q})), 1)
	if !tk.Active() {
		t.Fatal("a PREPARE's ticket is inactive")
	}
	res := cql.PreparedResult{ID: []byte(id), Metadata: cql.PreparedMetadata{Columns: []cql.ColumnSpec{intCol("k")}, PKIndexes: []uint16{0}}}
	for i := 0; i < cols; i++ {
		res.ResultMetadata.Columns = append(res.ResultMetadata.Columns, intCol(fmt.Sprintf("c%d", i)))
	}
	res.ResultMetadata.ColumnCount = cols
	s.Response(tk, cql.NewFrame(respHeader(cql.OpResult), body(res)), 2)
}

// call runs one request and its response, latency us microseconds, through views reused
// from call to call as the sidecar reuses its own.
func call(s *Stats, c *clock, op cql.Opcode, req []byte, resOp cql.Opcode, res []byte, us int64) {
	start := c.t
	tk := s.Request(view(&c.req, &c.rb, reqHeader(op), req), start)
	c.t += us * 1000
	if tk.Active() {
		s.Response(tk, view(&c.resp, &c.sb, respHeader(resOp), res), c.t)
	}
}

// view makes f a view of the frame of h and body, built in buf.
func view(f *cql.Frame, buf *[]byte, h cql.Header, body []byte) *cql.Frame {
	h.Length = uint32(len(body))
	*buf = append(cql.AppendHeader((*buf)[:0], h), body...)
	f.Reset(h, *buf, nil)
	return f
}

func rows(n int) []byte {
	r := cql.RowsResult{Metadata: cql.RowsMetadata{ColumnCount: 1, Columns: []cql.ColumnSpec{intCol("v")}}}
	for i := 0; i < n; i++ {
		r.Rows = append(r.Rows, [][]byte{{0, 0, 0, byte(i)}})
	}
	return body(r)
}

func find(t *testing.T, list []Statement, text string, prepared bool) Statement {
	t.Helper()
	for _, st := range list {
		if st.Statement == text && st.Prepared == prepared {
			return st
		}
	}
	t.Fatalf("no statement %q (prepared %v) in %+v", text, prepared, list)
	return Statement{}
}

func TestPreparedStatementStatistics(t *testing.T) {
	s, c := newStats(t, 0)
	prepare(t, s, "SELECT v FROM ks.t WHERE k = ?", "id1", 1)
	exec := body(cql.Execute{ID: []byte("id1"), Params: cql.QueryParams{Consistency: cql.LocalOne,
		Flags: cql.QueryValues | cql.QueryPageSize, PageSize: 100, Values: []cql.Value{{Bytes: []byte{0, 0, 0, 1}}}}})
	for i := 1; i <= 100; i++ {
		call(s, c, cql.OpExecute, exec, cql.OpResult, rows(2), int64(i*10)) // 10 µs .. 1000 µs
	}
	call(s, c, cql.OpExecute, exec, cql.OpError, body(cql.Error{Code: cql.ErrCodeReadTimeout, Message: "timeout", Extra: make([]byte, 9)}), 5000)

	st := find(t, s.List("calls", 0, false), "SELECT v FROM ks.t WHERE k = ?", true)
	if st.Calls != 101 || st.Keyspace != "ks" || st.Table != "t" {
		t.Errorf("calls %d keyspace %q table %q, want 101 ks t", st.Calls, st.Keyspace, st.Table)
	}
	if st.Rows != 200 {
		t.Errorf("rows %d, want 200", st.Rows)
	}
	if st.Errors["read_timeout"] != 1 || len(st.Errors) != 1 {
		t.Errorf("errors %v, want read_timeout:1", st.Errors)
	}
	if st.Consistency["LOCAL_ONE"] != 101 {
		t.Errorf("consistency %v", st.Consistency)
	}
	if want := uint64(10 * 100 * 101 / 2); st.TotalTimeUS != want+5000 || st.MaxUS != 5000 {
		t.Errorf("total %d max %d, want %d 5000", st.TotalTimeUS, st.MaxUS, want+5000)
	}
	// p50 of 10..1000 µs and one 5000 µs is 510 µs; the histogram is within 6.25%.
	if st.P50US < 478 || st.P50US > 542 {
		t.Errorf("p50 %d µs, want 510 ± 6.25%%", st.P50US)
	}
	if st.P99US < 937 || st.P99US > 1063 {
		t.Errorf("p99 %d µs, want 1000 ± 6.25%%", st.P99US)
	}
	if st.P999US < 4687 || st.P999US > 5000 {
		t.Errorf("p999 %d µs, want 5000 - 6.25%%", st.P999US)
	}
	if !st.LastSeen.After(st.FirstSeen) {
		t.Errorf("first seen %v, last seen %v", st.FirstSeen, st.LastSeen)
	}
}

func query(q string, cl cql.Consistency, pageSize int32, values ...[]byte) []byte {
	p := cql.QueryParams{Consistency: cl}
	if pageSize > 0 {
		p.Flags |= cql.QueryPageSize
		p.PageSize = pageSize
	}
	if len(values) > 0 {
		p.Flags |= cql.QueryValues
		for _, v := range values {
			p.Values = append(p.Values, cql.Value{Bytes: v})
		}
	}
	return body(cql.Query{Query: q, Params: p})
}

func TestUnpreparedQueriesAreNormalizedIntoOneEntry(t *testing.T) {
	s, c := newStats(t, 0)
	for i := 0; i < 50; i++ {
		call(s, c, cql.OpQuery, query(fmt.Sprintf("SELECT v FROM ks.t WHERE k = %d", i), cql.One, 5000), cql.OpResult, rows(1), 100)
	}
	// The same text prepared is a separate entry.
	prepare(t, s, "SELECT v FROM ks.t WHERE k = ?", "id", 1)
	call(s, c, cql.OpExecute, body(cql.Execute{ID: []byte("id"), Params: cql.QueryParams{Consistency: cql.One}}), cql.OpResult, rows(1), 100)
	// A driver's control queries: system keyspaces are not anti-patterns.
	for i := 0; i < 7; i++ {
		call(s, c, cql.OpQuery, query("SELECT * FROM system.local WHERE key='local'", cql.One, 0), cql.OpResult, rows(1), 100)
	}
	list := s.List("calls", 0, false)
	un := find(t, list, "SELECT v FROM ks.t WHERE k = ?", false)
	if un.Calls != 50 || un.Rows != 50 {
		t.Errorf("unprepared: calls %d rows %d, want 50 50", un.Calls, un.Rows)
	}
	if p := find(t, list, "SELECT v FROM ks.t WHERE k = ?", true); p.Calls != 1 {
		t.Errorf("prepared calls %d, want 1", p.Calls)
	}
	if n := s.AntiPatterns("unprepared", "ks", "t"); n != 50 {
		t.Errorf("unprepared anti-patterns %d, want 50", n)
	}
	if n := s.AntiPatterns("unprepared", "system", "local"); n != 0 {
		t.Errorf("system.local counted as unprepared %d times", n)
	}
	if n := s.AntiPatterns("unpaged_read", "system", "local"); n != 0 {
		t.Errorf("system.local counted as unpaged %d times", n)
	}
	if len(list) != 3 || list[0].Calls != 50 || list[1].Calls != 7 {
		t.Errorf("sort=calls gave %+v", list)
	}
}

func TestAntiPatterns(t *testing.T) {
	s, c := newStats(t, 0)
	call(s, c, cql.OpQuery, query("SELECT v FROM ks.a WHERE v = ? ALLOW FILTERING", cql.One, 100, []byte{1}), cql.OpResult, rows(0), 1)
	call(s, c, cql.OpQuery, query("SELECT v FROM ks.b", cql.One, 0), cql.OpResult, rows(0), 1)
	call(s, c, cql.OpQuery, query("SELECT v FROM ks.c", cql.All, 10), cql.OpResult, rows(0), 1)
	call(s, c, cql.OpQuery, query("SELECT count(*) FROM ks.h", cql.One, 100), cql.OpResult, rows(0), 1)
	call(s, c, cql.OpQuery, query("SELECT v FROM ks.i WHERE k IN (SELECT 1) AND c = ?", cql.One, 100, []byte{1}), cql.OpResult, rows(0), 1)
	call(s, c, cql.OpQuery, query("INSERT INTO ks.d (k) VALUES (?)", cql.Any, 0, []byte{1}), cql.OpResult, body(cql.VoidResult{}), 1)
	call(s, c, cql.OpQuery, query("UPDATE ks.e SET v = ? WHERE k = ?", cql.Serial, 0, []byte{1}, []byte{2}), cql.OpResult, body(cql.VoidResult{}), 1)
	call(s, c, cql.OpQuery, query("UPDATE ks.f SET v = ? WHERE k = ? IF v = ?", cql.Serial, 0, []byte{1}, []byte{2}, []byte{3}), cql.OpResult, body(cql.VoidResult{}), 1)
	prepare(t, s, "SELECT * FROM ks.wide WHERE k = ?", "wide", 25)
	prepare(t, s, "SELECT * FROM ks.narrow WHERE k = ?", "narrow", 5)
	for _, id := range []string{"wide", "narrow"} {
		call(s, c, cql.OpExecute, body(cql.Execute{ID: []byte(id), Params: cql.QueryParams{Consistency: cql.One, Flags: cql.QueryPageSize, PageSize: 10}}), cql.OpResult, rows(0), 1)
	}
	multi := cql.Batch{Type: cql.BatchLogged, Consistency: cql.Quorum, Queries: []cql.BatchQuery{
		{Query: "INSERT INTO ks.g (k, v) VALUES (?, ?)", Values: []cql.Value{{Bytes: []byte{1}}, {Bytes: []byte{9}}}},
		{Query: "INSERT INTO ks.g (k, v) VALUES (?, ?)", Values: []cql.Value{{Bytes: []byte{2}}, {Bytes: []byte{9}}}},
	}}
	single := multi
	single.Queries = []cql.BatchQuery{multi.Queries[0], multi.Queries[0]}
	unlogged := multi
	unlogged.Type = cql.BatchUnlogged
	for _, b := range []cql.Batch{multi, single, unlogged} {
		call(s, c, cql.OpBatch, body(b), cql.OpResult, body(cql.VoidResult{}), 1)
	}

	for _, tt := range []struct {
		kind, table string
		want        uint64
	}{
		{"allow_filtering", "a", 1}, {"unprepared", "a", 1},
		{"unpaged_read", "b", 1}, {"unpaged_read", "a", 0}, {"unprepared", "b", 0},
		{"cl_all", "c", 1}, {"cl_any", "d", 1}, {"unprepared", "d", 1},
		{"serial_without_lwt", "e", 1}, {"serial_without_lwt", "f", 0},
		{"select_star", "wide", 1}, {"select_star", "narrow", 0},
		{"logged_batch_multi_partition", "g", 1},
		{"full_scan", "a", 1}, {"full_scan", "b", 1}, {"full_scan", "c", 1}, {"full_scan", "h", 1},
		{"full_scan", "i", 0}, {"full_scan", "wide", 0}, {"full_scan", "d", 0},
	} {
		if got := s.AntiPatterns(tt.kind, "ks", tt.table); got != tt.want {
			t.Errorf("%s on ks.%s: %d, want %d", tt.kind, tt.table, got, tt.want)
		}
	}
	st := find(t, s.List("calls", 0, false), "BATCH LOGGED: INSERT INTO ks.g (k, v) VALUES (?, ?); INSERT INTO ks.g (k, v) VALUES (?, ?)", false)
	if st.Calls != 2 || st.Keyspace != "ks" || st.Table != "g" || st.Consistency["QUORUM"] != 2 {
		t.Errorf("logged batch entry %+v", st)
	}
}

func TestOffCountsNothingButLearnsPrepares(t *testing.T) {
	s, c := newStats(t, 0)
	s.SetEnabled(false)
	prepare(t, s, "SELECT v FROM ks.t WHERE k = ?", "id1", 1)
	exec := body(cql.Execute{ID: []byte("id1"), Params: cql.QueryParams{Consistency: cql.One}})
	call(s, c, cql.OpExecute, exec, cql.OpResult, rows(1), 10)
	call(s, c, cql.OpQuery, query("SELECT v FROM ks.t WHERE k = 1", cql.One, 0), cql.OpResult, rows(1), 10)
	if l := s.List("calls", 0, false); len(l) != 0 {
		t.Fatalf("statistics kept while off: %+v", l)
	}
	s.SetEnabled(true)
	call(s, c, cql.OpExecute, exec, cql.OpResult, rows(1), 10)
	find(t, s.List("calls", 0, false), "SELECT v FROM ks.t WHERE k = ?", true)
}

func TestEvictionOfTheLeastCalled(t *testing.T) {
	s, c := newStats(t, 3)
	for i, n := range []int{5, 1, 3} {
		for j := 0; j < n; j++ {
			call(s, c, cql.OpQuery, query(fmt.Sprintf("SELECT v FROM ks.t%d", i), cql.One, 10), cql.OpResult, rows(0), 1)
		}
	}
	call(s, c, cql.OpQuery, query("SELECT v FROM ks.t9", cql.One, 10), cql.OpResult, rows(0), 1)
	list := s.List("calls", 0, false)
	var texts []string
	for _, st := range list {
		texts = append(texts, st.Statement)
	}
	if got := strings.Join(texts, ","); got != "SELECT v FROM ks.t0,SELECT v FROM ks.t2,SELECT v FROM ks.t9" {
		t.Errorf("after eviction: %s", got)
	}
	if s.Evicted() != 1 {
		t.Errorf("evicted %d, want 1", s.Evicted())
	}
	s.Reset()
	if len(s.List("calls", 0, false)) != 0 || s.Evicted() != 0 {
		t.Error("reset kept entries")
	}
	call(s, c, cql.OpQuery, query("SELECT v FROM ks.t0", cql.One, 10), cql.OpResult, rows(0), 1)
	if l := s.List("calls", 0, false); len(l) != 1 || l[0].Calls != 1 {
		t.Errorf("after reset: %+v", l)
	}
}

func TestKnownStatementsDoNotAllocate(t *testing.T) {
	s, c := newStats(t, 0)
	prepare(t, s, "SELECT v FROM ks.t WHERE k = ?", "id1", 1)
	exec := body(cql.Execute{ID: []byte("id1"), Params: cql.QueryParams{Consistency: cql.LocalOne,
		Flags: cql.QueryValues, Values: []cql.Value{{Bytes: []byte{0, 0, 0, 1}}}}})
	q := query("SELECT v FROM ks.t WHERE k = 1", cql.One, 0)
	res := rows(3)
	errBody := body(cql.Error{Code: cql.ErrCodeOverloaded, Message: "busy"})
	call(s, c, cql.OpExecute, exec, cql.OpResult, res, 10)
	call(s, c, cql.OpQuery, q, cql.OpResult, res, 10)
	for name, f := range map[string]func(){
		"execute": func() { call(s, c, cql.OpExecute, exec, cql.OpResult, res, 10) },
		"query":   func() { call(s, c, cql.OpQuery, q, cql.OpResult, res, 10) },
		"error":   func() { call(s, c, cql.OpExecute, exec, cql.OpError, errBody, 10) },
		"off": func() {
			s.SetEnabled(false)
			call(s, c, cql.OpExecute, exec, cql.OpResult, res, 10)
			s.SetEnabled(true)
		},
	} {
		if a := testing.AllocsPerRun(1000, f); a != 0 {
			t.Errorf("%s: %.1f allocations per request, want 0", name, a)
		}
	}
	st := find(t, s.List("calls", 0, false), "SELECT v FROM ks.t WHERE k = ?", true)
	if st.Calls < 2002 || st.Errors["overloaded"] < 1000 {
		t.Errorf("calls %d errors %v", st.Calls, st.Errors)
	}
}

func TestMergeAddsHistogramsAndNeverAveragesPercentiles(t *testing.T) {
	a, ca := newStats(t, 0)
	b, cb := newStats(t, 0)
	q := query("SELECT v FROM ks.t WHERE k = 1", cql.One, 10)
	// Sidecar a: 90 fast calls (100 µs); sidecar b: 10 slow calls (10 ms) and 1 error.
	for i := 0; i < 90; i++ {
		call(a, ca, cql.OpQuery, q, cql.OpResult, rows(1), 100)
	}
	for i := 0; i < 10; i++ {
		call(b, cb, cql.OpQuery, q, cql.OpResult, rows(2), 10000)
	}
	call(b, cb, cql.OpQuery, q, cql.OpError, body(cql.Error{Code: cql.ErrCodeInvalid, Message: "x"}), 10000)
	only := query("SELECT v FROM ks.u", cql.Quorum, 10)
	call(b, cb, cql.OpQuery, only, cql.OpResult, rows(0), 50)

	merged, ok := merge(a.List("calls", 0, true), b.List("calls", 0, true))
	if !ok {
		t.Fatal("Merge said a histogram is missing")
	}
	SortStatements(merged, "calls")
	if len(merged) != 2 {
		t.Fatalf("merged %d entries, want 2: %+v", len(merged), merged)
	}
	m := merged[0]
	if m.Calls != 101 || m.Rows != 110 || m.Errors["invalid"] != 1 || m.Consistency["ONE"] != 101 {
		t.Errorf("merged %+v", m)
	}
	if m.TotalTimeUS != 90*100+11*10000 || m.MaxUS != 10000 {
		t.Errorf("total %d max %d", m.TotalTimeUS, m.MaxUS)
	}
	// p50 is a fast call's; p99 a slow one's. Averaging the two sidecars' p99 (100 and
	// 10000 µs) would give about 5050.
	if m.P50US < 94 || m.P50US > 107 || m.P99US < 9375 || m.P99US > 10000 {
		t.Errorf("p50 %d p99 %d", m.P50US, m.P99US)
	}
	if merged[1].Statement != "SELECT v FROM ks.u" || merged[1].Calls != 1 || merged[1].Consistency["QUORUM"] != 1 {
		t.Errorf("second %+v", merged[1])
	}
	if _, ok := merge(a.List("calls", 0, false)); ok {
		t.Error("Merge accepted statements without histograms")
	}
}

// TestRowsCountedFromLZ4Prefix counts a compressed result's rows from the prefix that
// the sidecar decompresses (cql.LZ4Prefix, tested against the full decompression in cql),
// and leaves uncounted the rows of a result whose metadata is longer than the prefix.
func TestRowsCountedFromLZ4Prefix(t *testing.T) {
	wide := cql.RowsResult{}
	for i := 0; i < 40; i++ {
		wide.Metadata.Columns = append(wide.Metadata.Columns, intCol(fmt.Sprintf("a_rather_long_column_name_%d", i)))
	}
	for i := 0; i < 9; i++ {
		wide.Rows = append(wide.Rows, make([][]byte, 40))
	}
	warned := cql.AppendResponsePrefix(nil, cql.FlagWarning, cql.ResponsePrefix{Warnings: []string{"slow"}})
	tests := []struct {
		name  string
		flags byte
		body  []byte
		want  uint64
	}{
		{"short metadata", 0, rows(7), 7},
		{"after warnings", cql.FlagWarning, append(warned, rows(3)...), 3},
		{"metadata past the prefix", 0, body(wide), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, c := newStats(t, 0)
			z, err := cql.LZ4{}.Compress(nil, tt.body)
			if err != nil {
				t.Fatal(err)
			}
			tk := s.Request(cql.NewFrame(reqHeader(cql.OpQuery), query("SELECT v FROM ks.t", cql.One, 10)), c.t)
			h := respHeader(cql.OpResult)
			h.Flags = tt.flags | cql.FlagCompression
			h.Length = uint32(len(z))
			cc := &countingLZ4{}
			var f cql.Frame
			f.Reset(h, append(cql.AppendHeader(nil, h), z...), cc)
			s.Response(tk, &f, c.t+1000)
			if cc.full != 0 {
				t.Errorf("%d full decompressions; want the start alone", cc.full)
			}
			if st := find(t, s.List("calls", 0, false), "SELECT v FROM ks.t", false); st.Calls != 1 || st.Rows != tt.want {
				t.Errorf("calls %d rows %d; want 1 and %d", st.Calls, st.Rows, tt.want)
			}
		})
	}
}

// BenchmarkKnownExecute is the data-path cost of statistics for a known prepared
// statement: Request and Response for one EXECUTE with its RESULT.
func BenchmarkKnownExecute(b *testing.B) {
	s := New(Options{})
	s.SetEnabled(true)
	tk := s.Request(cql.NewFrame(reqHeader(cql.OpPrepare), body(cql.Prepare{Query: "SELECT v FROM ks.t WHERE k = ?"})), 1)
	s.Response(tk, cql.NewFrame(respHeader(cql.OpResult), body(cql.PreparedResult{ID: []byte("0123456789abcdef"),
		ResultMetadata: cql.RowsMetadata{ColumnCount: 1, Columns: []cql.ColumnSpec{intCol("v")}}})), 2)
	exec := body(cql.Execute{ID: []byte("0123456789abcdef"), Params: cql.QueryParams{Consistency: cql.LocalOne,
		Flags: cql.QueryValues | cql.QueryPageSize, PageSize: 5000, Values: []cql.Value{{Bytes: []byte{0, 0, 0, 1}}}}})
	res := rows(1)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var now int64
		var rq, rs cql.Frame
		var rb, sb []byte
		for pb.Next() {
			now += 1000
			t := s.Request(view(&rq, &rb, reqHeader(cql.OpExecute), exec), now)
			s.Response(t, view(&rs, &sb, respHeader(cql.OpResult), res), now+50000)
		}
	})
}

// BenchmarkOff is the cost with statistics off.
func BenchmarkOff(b *testing.B) {
	s := New(Options{})
	exec := body(cql.Execute{ID: []byte("0123456789abcdef"), Params: cql.QueryParams{Consistency: cql.LocalOne}})
	var rq cql.Frame
	var rb []byte
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if t := s.Request(view(&rq, &rb, reqHeader(cql.OpExecute), exec), 1); t.Active() {
			b.Fatal("active while off")
		}
	}
}

// countingLZ4 counts full decompressions.
type countingLZ4 struct {
	cql.LZ4
	full int
}

func (c *countingLZ4) Decompress(dst, src []byte) ([]byte, error) {
	c.full++
	return c.LZ4.Decompress(dst, src)
}

// TestImportCarriesStatistics: what one Stats lists (with histograms) and its prepared
// statements, imported into another, list the same there, and go on counting.
func TestImportCarriesStatistics(t *testing.T) {
	a, c := newStats(t, 0)
	prepare(t, a, "SELECT v FROM ks.t WHERE k = ?", "id1", 1)
	exec := body(cql.Execute{ID: []byte("id1"), Params: cql.QueryParams{Consistency: cql.LocalOne,
		Flags: cql.QueryValues, Values: []cql.Value{{Bytes: []byte{0, 0, 0, 1}}}}})
	for i := 1; i <= 50; i++ {
		call(a, c, cql.OpExecute, exec, cql.OpResult, rows(2), int64(i*10))
	}
	call(a, c, cql.OpExecute, exec, cql.OpError, body(cql.Error{Code: cql.ErrCodeReadTimeout, Message: "timeout", Extra: make([]byte, 9)}), 900)
	call(a, c, cql.OpQuery, query("SELECT * FROM ks.t WHERE k = 1", cql.Quorum, 0), cql.OpResult, rows(1), 30)
	want := a.List("calls", 0, true)

	b, bc := newStats(t, 0)
	bc.t = c.t
	b.LearnPrepared(a.PreparedStatements())
	b.Import(want)
	got := b.List("calls", 0, true)
	if len(got) != len(want) {
		t.Fatalf("%d statements imported; want %d", len(got), len(want))
	}
	for _, w := range want {
		g := find(t, got, w.Statement, w.Prepared)
		if fmt.Sprint(g) != fmt.Sprint(w) {
			t.Errorf("imported\n%+v\nwant\n%+v", g, w)
		}
	}
	// The prepared id is known in b: an EXECUTE counts under its text.
	call(b, bc, cql.OpExecute, exec, cql.OpResult, rows(2), 10)
	if st := find(t, b.List("calls", 0, false), "SELECT v FROM ks.t WHERE k = ?", true); st.Calls != 52 {
		t.Errorf("calls %d after one more EXECUTE; want 52", st.Calls)
	}
}
