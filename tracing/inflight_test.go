package tracing

import (
	"testing"

	"github.com/tracecar/tracecar/internal/cql"
)

// TestDescribeInFlight checks what a request in flight shows, in each mode that keeps a
// record, before its response: the text redacted as the session record's, the target
// and the consistency level; and that a Ticket whose request ended holds nothing.
func TestDescribeInFlight(t *testing.T) {
	batch := cql.Batch{Type: cql.BatchLogged, Consistency: cql.Quorum, Queries: []cql.BatchQuery{
		{Query: "INSERT INTO ks.t (k) VALUES (7)"},
		{Prepared: true, ID: testID},
		{Prepared: true, ID: []byte{1, 2}},
	}}
	tests := []struct {
		name string
		cfg  Config
		msg  cql.Message
		comp cql.Compressor
		want InFlight
	}{
		{"fast execute", Config{Enable: true, Fast: true}, executeMsg([]byte("secret!!")), nil,
			InFlight{Mode: ModeFast, Query: testQuery, Keyspace: "keyspace1", Table: "standard1", Consistency: "LOCAL_ONE"}},
		{"fast query lz4", Config{Enable: true, Fast: true},
			cql.Query{Query: "SELECT v FROM shop.orders WHERE id = 'alice'", Params: cql.QueryParams{Consistency: cql.Quorum}}, cql.LZ4{},
			InFlight{Mode: ModeFast, Query: "SELECT v FROM shop.orders WHERE id = ?", Keyspace: "shop", Table: "orders", Consistency: "QUORUM"}},
		{"full query snappy", Config{Enable: true},
			cql.Query{Query: "ALTER ROLE bob WITH PASSWORD = 'hunter2'", Params: cql.QueryParams{Consistency: cql.One}}, cql.Snappy{},
			InFlight{Mode: ModeFull, Query: "ALTER ROLE bob WITH PASSWORD = ?", Consistency: "ONE"}},
		{"sampled batch", Config{Probability: 1}, batch, nil,
			InFlight{Mode: ModeSampled, Query: "BATCH LOGGED: INSERT INTO ks.t (k) VALUES (?); " + testQuery + "; <prepared statement 0x0102>",
				Keyspace: "ks", Consistency: "QUORUM"}}, // the statements name two tables: no table, as in spans
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := New(Options{})
			defer mustClose(t, tr)
			c := newCaller(tr, testClient, testCoord)
			defer c.Close()
			prepare(t, c, 1)
			tr.Statements().Put(testID, Statement{Query: testQuery, Keyspace: "keyspace1"})
			mustConfig(t, tr, tt.cfg)
			h, f := mustRequest(t, reqHeader(2, 0), tt.msg, tt.comp)
			c.OnRequest(h, f, tt.comp)
			tk := c.inflight[2]
			before := tk.Start()
			p := tk.Peek()
			if !p.Held() || p.Start() == 0 || p.Start() != before {
				t.Fatalf("Peek holds %v, start %d (Ticket start %d)", p.Held(), p.Start(), before)
			}
			clear(tk.r.buf) // the record is reused after End: the Peek is a copy of its own
			if got := tr.Describe(p); got != tt.want {
				t.Errorf("Describe:\n got %+v\nwant %+v", got, tt.want)
			}
			rh, rf := mustResponse(t, respHeader(2, 0), cql.ResponsePrefix{}, cql.VoidResult{}, nil)
			c.OnResponse(rh, rf, nil)
			c.ResponseSent(2)
			// The record goes back to the Conn for reuse: the old Ticket is stale.
			h2, f2 := mustRequest(t, reqHeader(3, 0), executeMsg(), nil)
			c.OnRequest(h2, f2, nil)
			if tk.Peek().Held() || tk.Start() != 0 {
				t.Error("a Ticket whose request ended still peeks at its record")
			}
		})
	}
	var zero Ticket
	if zero.Peek().Held() || (&Tracer{}).Describe(Peek{}) != (InFlight{}) {
		t.Error("a zero Ticket holds a request")
	}
}
