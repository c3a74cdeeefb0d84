package sidecar

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/metrics"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/statements"
)

// bodyCounter counts the full decompressions of each compressed body, by its bytes: a
// request's and its response's are told apart, and so are the decompressions of a frame
// and of a copy of it.
type bodyCounter struct {
	cql.Compressor
	n map[string]int
}

func (c *bodyCounter) Decompress(dst, src []byte) ([]byte, error) {
	c.n[string(src)]++
	return c.Compressor.Decompress(dst, src)
}

// count returns how often the body of frame was decompressed, and forgets it.
func (c *bodyCounter) count(frame []byte) int {
	k := string(frame[cql.HeaderSize:])
	n := c.n[k]
	delete(c.n, k)
	return n
}

// TestDecodedOnce: whatever the tracing mode, with statement statistics and a trace
// filter that reads the statement, a compressed request (lz4 and snappy) is decompressed
// at most once between its arrival and the end of its response, and so is its compressed
// response: every reader (the system-table rewrite, the EXECUTE learner, statement
// statistics, the trace filter, tracing's Begin and End, a slow fast-mode request's
// record, the stripping of a sampled response's tracing id) reads the one view.
func TestDecodedOnce(t *testing.T) {
	modes := []struct {
		name   string
		cfg    tracing.Config
		client bool // the client sets the tracing flag itself
	}{
		{"off", tracing.Config{}, false},
		{"fast", tracing.Config{Enable: true, Fast: true}, false}, // threshold 0: every request is slow
		{"full", tracing.Config{Enable: true}, false},
		{"sampled", tracing.Config{Probability: 1}, false},
		{"client", tracing.Config{}, true},
	}
	type exchange struct {
		name string
		req  cql.Message
		resp cql.Message
	}
	local := rowsBody("local", localColumns(), false,
		[][]byte{text("local"), text("dc"), ip("10.0.0.1"), port(9042), ip("10.0.0.1")})
	localRows, err := cql.DecodeResult(local, cql.V4)
	if err != nil {
		t.Fatal(err)
	}
	sysID := []byte("system-local-id!")
	exchanges := []exchange{
		{"insert", cql.Query{Query: insertQuery(1024), Params: cql.QueryParams{Consistency: cql.One}}, cql.VoidResult{}},
		{"select local", cql.Query{Query: "SELECT * FROM system.local WHERE key = 'local'", Params: cql.QueryParams{Consistency: cql.One}}, localRows},
		{"long select", cql.Query{Query: longSelect(), Params: cql.QueryParams{Consistency: cql.One}}, cql.VoidResult{}},
		{"prepare", cql.Prepare{Query: "SELECT * FROM ks.t WHERE k = ?"},
			cql.PreparedResult{ID: []byte("user-statement-1"), ResultMetadata: cql.RowsMetadata{Columns: localColumns()}}},
		{"execute", cql.Execute{ID: sysID, Params: cql.QueryParams{Consistency: cql.One}}, localRows},
		{"batch", cql.Batch{Queries: []cql.BatchQuery{{Query: "INSERT INTO ks.t (k) VALUES (1)"}, {Prepared: true, ID: []byte("user-statement-1")}}, Consistency: cql.One}, cql.VoidResult{}},
	}
	filters := []struct {
		name string
		f    map[string]string
	}{
		{"no filter", nil},
		{"keyspace filter", map[string]string{"keyspace": "ks"}},
		{"statement filter", map[string]string{"statement": "SELECT"}},
	}
	for ci, comp := range []cql.Compressor{cql.LZ4{}, cql.Snappy{}} {
		for _, m := range modes {
			for _, fl := range filters {
				t.Run(comp.Name()+"/"+m.name+"/"+fl.name, func(t *testing.T) {
					bc := &bodyCounter{Compressor: comp, n: map[string]int{}}
					orig := compressors[ci+1]
					compressors[ci+1] = bc
					t.Cleanup(func() { compressors[ci+1] = orig })

					tr := tracing.New(tracing.Options{})
					t.Cleanup(func() { tr.Close(context.Background()) })
					if err := tr.SetConfig(m.cfg); err != nil {
						t.Fatal(err)
					}
					if fl.f != nil {
						flt, err := tracing.ParseFilter(fl.f)
						if err != nil {
							t.Fatal(err)
						}
						tr.SetFilter(flt)
					}
					st := statements.New(statements.Options{})
					st.SetEnabled(true)
					c := fuzzConn(int32(ci + 1))
					c.p = New(Config{NodeAddr: "127.0.0.1:9042", Statements: st, Metrics: metrics.New()}, tr)
					c.p.rememberStmt(sysID, kindLocal, localColumns())
					ap := netip.MustParseAddrPort("127.0.0.1:1")
					c.clientAddr, c.nodeAddr = ap, ap
					t.Cleanup(c.finishTrace)

					for i, ex := range exchanges {
						stream := int16(i + 1)
						var flags byte
						if m.client {
							flags = cql.FlagTracing
						}
						reqF, err := cql.AppendFrameCompressed(nil, cql.Header{Version: cql.V4, Flags: flags, Stream: stream}, ex.req, comp)
						if err != nil {
							t.Fatal(err)
						}
						h, _ := cql.ParseHeader(reqF)
						sentBody := string(reqF[cql.HeaderSize:])
						if tk, _ := c.request(h, reqF, len(reqF), 0); tk.Events() {
							c.wrote([]tracing.Ticket{tk}, false)
						}
						req, ok, _ := c.streams.take(stream)
						if !ok {
							t.Fatalf("%s: not in flight", ex.name)
						}
						// The node answers with a tracing id when the forwarded request asked for one.
						rh := cql.Header{Version: cql.ResponseBit | cql.V4, Stream: stream}
						var prefix cql.ResponsePrefix
						if reqF[1]&cql.FlagTracing != 0 {
							rh.Flags |= cql.FlagTracing
							prefix = cql.ResponsePrefix{TracingID: cql.NewTimeUUID(time.Now()), HasTracingID: true}
						}
						respF, err := cql.AppendResponseFrame(nil, rh, prefix, ex.resp, comp)
						if err != nil {
							t.Fatal(err)
						}
						rh, _ = cql.ParseHeader(respF)
						out, done := c.response(rh, respF, &req, tracing.Now())
						if done.Events() {
							c.wrote([]tracing.Ticket{done}, true)
						}
						if len(out) < cql.HeaderSize {
							t.Fatalf("%s: response of %d bytes forwarded", ex.name, len(out))
						}
						if n := bc.n[sentBody]; n > 1 {
							t.Errorf("%s: request decompressed %d times; want at most once", ex.name, n)
						}
						if n := bc.count(respF); n > 1 {
							t.Errorf("%s: response decompressed %d times; want at most once", ex.name, n)
						}
						delete(bc.n, sentBody)
						for body, n := range bc.n {
							t.Errorf("%s: %d decompressions of a body that is neither the request nor the response (%d bytes)", ex.name, n, len(body))
						}
						clear(bc.n)
					}
				})
			}
		}
	}
}
