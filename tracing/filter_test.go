package tracing

import (
	"net/netip"
	"testing"

	"github.com/tracecar/tracecar/internal/cql"
)

// TestFilterMatching runs the same requests (an EXECUTE of testQuery, a QUERY on ks.t1 and
// one on ks.t2, an lz4-compressed QUERY on ks.t1) through fast mode with threshold 0 under
// each filter, and counts the sessions recorded.
func TestFilterMatching(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params map[string]string
		user   string
		want   int
	}{
		{"none", nil, "", 4},
		{"table", map[string]string{"table": "t1"}, "", 2},
		{"keyspace", map[string]string{"keyspace": "KEYSPACE1"}, "", 1},
		{"opcode", map[string]string{"opcode": "query"}, "", 3},
		{"client in", map[string]string{"client": "10.0.0.0/8"}, "", 4},
		{"client out", map[string]string{"client": "192.168.0.1"}, "", 0},
		{"user", map[string]string{"user": "alice"}, "alice", 4},
		{"other user", map[string]string{"user": "bob"}, "alice", 0},
		{"prepared id", map[string]string{"statement": "0xdeadbeef0102030405060708090a0b0c"}, "", 1},
		{"substring, normalized", map[string]string{"statement": "FROM ks.t2 WHERE k = 42"}, "", 1},
		{"and", map[string]string{"table": "t1", "opcode": "EXECUTE"}, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(Options{})
			defer mustClose(t, tr)
			mustConfig(t, tr, Config{Enable: true, Fast: true, ThresholdMicros: 0})
			c := newCaller(tr, netip.MustParseAddrPort("10.1.2.3:5000"), netip.MustParseAddrPort("10.9.9.9:9042"))
			defer c.Close()
			if tc.user != "" {
				c.SetUser(tc.user)
			}
			prepare(t, c, 1)
			before := len(tr.SlowLog(100))
			f, err := ParseFilter(tc.params)
			if err != nil {
				t.Fatal(err)
			}
			tr.SetFilter(f)
			var lz4 cql.LZ4
			reqs := []struct {
				m    cql.Message
				comp cql.Compressor
			}{
				{executeMsg([]byte("k")), nil},
				{cql.Query{Query: "SELECT v FROM ks.t1 WHERE k = 1", Params: cql.QueryParams{Consistency: cql.One}}, nil},
				{cql.Query{Query: "SELECT v FROM ks.t2 WHERE k = 7", Params: cql.QueryParams{Consistency: cql.One}}, nil},
				{cql.Query{Query: "SELECT v FROM ks.t1 WHERE k = 2", Params: cql.QueryParams{Consistency: cql.One}}, lz4},
			}
			for i, r := range reqs {
				flags := byte(0)
				if r.comp != nil {
					flags = cql.FlagCompression
				}
				h, fr := mustRequest(t, reqHeader(int16(10+i), flags), r.m, r.comp)
				c.OnRequest(h, fr, r.comp)
				rh, rf := mustResponse(t, respHeader(int16(10+i), 0), cql.ResponsePrefix{}, cql.VoidResult{}, nil)
				c.OnResponse(rh, rf, r.comp)
			}
			if got := len(tr.SlowLog(100)) - before; got != tc.want {
				t.Errorf("%d sessions recorded, want %d", got, tc.want)
			}
		})
	}
}

// TestFilterNamesFollowCQLCase: a filter's keyspace and table are read as CQL reads the
// statement's: unquoted they fold to lower case, quoted they keep their case.
func TestFilterNamesFollowCQLCase(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params map[string]string
		want   int // of the two queries, on "Shop".t and on shop.t
	}{
		{"quoted matches its case", map[string]string{"keyspace": `"Shop"`}, 1},
		{"unquoted folds", map[string]string{"keyspace": "SHOP"}, 1},
		{"quoted table", map[string]string{"table": `"t"`}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(Options{})
			defer mustClose(t, tr)
			mustConfig(t, tr, Config{Enable: true, Fast: true})
			c := newCaller(tr, netip.MustParseAddrPort("10.1.2.3:5000"), netip.MustParseAddrPort("10.9.9.9:9042"))
			defer c.Close()
			f, err := ParseFilter(tc.params)
			if err != nil {
				t.Fatal(err)
			}
			tr.SetFilter(f)
			for i, q := range []string{`SELECT v FROM "Shop".t`, "SELECT v FROM shop.t"} {
				h, fr := mustRequest(t, reqHeader(int16(1+i), 0), cql.Query{Query: q, Params: cql.QueryParams{Consistency: cql.One}}, nil)
				c.OnRequest(h, fr, nil)
				rh, rf := mustResponse(t, respHeader(int16(1+i), 0), cql.ResponsePrefix{}, cql.VoidResult{}, nil)
				c.OnResponse(rh, rf, nil)
			}
			if got := len(tr.SlowLog(100)); got != tc.want {
				t.Errorf("%d sessions recorded, want %d", got, tc.want)
			}
		})
	}
	for _, bad := range []string{"shop.t", `"Shop`, "a b", "'shop'"} {
		if _, err := ParseFilter(map[string]string{"keyspace": bad}); err == nil {
			t.Errorf("keyspace %q accepted; want a FilterError", bad)
		}
	}
}
