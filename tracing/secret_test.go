package tracing

import (
	"testing"

	"github.com/tracecar/tracecar/internal/cql"
)

// TestSecretNotAskedOfNode checks that a sampled request carrying a secret is forwarded
// without the tracing flag, at protocol v3, v4 and v5, plain and compressed, while the
// others get it, and that NoNodeTracing asks the node for nothing.
func TestSecretNotAskedOfNode(t *testing.T) {
	secretID, plainID, unknownID := []byte{0xa1}, []byte{0xa2}, []byte{0xa3}
	bound := cql.QueryParams{Consistency: cql.One, Flags: cql.QueryValues, Values: []cql.Value{{Bytes: []byte("Bound-Secret")}}}
	msgs := []struct {
		name string
		m    cql.Message
		ask  bool
	}{
		{"select", cql.Query{Query: "SELECT v FROM ks.t WHERE k = 1", Params: cql.QueryParams{Consistency: cql.One}}, true},
		{"create role", cql.Query{Query: "CREATE ROLE carol WITH PASSWORD = 'Literal-Secret' AND LOGIN = true", Params: cql.QueryParams{Consistency: cql.One}}, false},
		{"alter user", cql.Query{Query: "alter user bob with password 'Literal-Secret'", Params: cql.QueryParams{Consistency: cql.One}}, false},
		{"prepare alter role", cql.Prepare{Query: "ALTER ROLE carol WITH PASSWORD = 'Literal-Secret'"}, false},
		{"execute bound password", cql.Execute{ID: secretID, Params: bound}, false},
		{"execute unknown statement", cql.Execute{ID: unknownID, Params: bound}, false},
		{"execute", cql.Execute{ID: plainID, Params: bound}, true},
		{"batch with a password map", cql.Batch{Consistency: cql.One, Queries: []cql.BatchQuery{
			{Query: "INSERT INTO ks.t (k, v) VALUES (1, 'x')"},
			{Query: "INSERT INTO ks.m (k, m) VALUES (1, {'password': 'Literal-Secret'})"}}}, false},
		{"batch with a bound password", cql.Batch{Consistency: cql.One, Queries: []cql.BatchQuery{
			{Prepared: true, ID: plainID, Values: bound.Values}, {Prepared: true, ID: secretID, Values: bound.Values}}}, false},
		{"batch", cql.Batch{Consistency: cql.One, Queries: []cql.BatchQuery{{Prepared: true, ID: plainID, Values: bound.Values}}}, true},
	}
	for _, off := range []bool{false, true} {
		for _, v := range []byte{cql.V3, cql.V4, cql.V5} {
			for _, comp := range []cql.Compressor{nil, cql.LZ4{}} {
				tr := New(Options{NoNodeTracing: off})
				tr.Statements().Put(secretID, Statement{Query: "ALTER ROLE carol WITH PASSWORD = ?"})
				tr.Statements().Put(plainID, Statement{Query: "SELECT v FROM ks.t WHERE k = ?"})
				mustConfig(t, tr, Config{Probability: 1})
				c := tr.NewConn(testClient, testCoord)
				for i, m := range msgs {
					h := reqHeader(int16(i), 0)
					h.Version = v
					if comp != nil {
						h.Flags |= cql.FlagCompression
					}
					h, f := mustRequest(t, h, m.m, comp)
					c.Begin(view(h, f, comp), 0)
					if got, want := f[1]&cql.FlagTracing != 0, m.ask && !off; got != want {
						t.Errorf("v%d, compressed %v, NoNodeTracing %v, %s: tracing flag sent %v; want %v", v, comp != nil, off, m.name, got, want)
					}
				}
				c.Close()
				mustClose(t, tr)
			}
		}
	}
}
