package pipeline

import (
	"context"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tracecar/tracecar/audit"
	"github.com/tracecar/tracecar/internal/capturefile"
	"github.com/tracecar/tracecar/tracing/capture"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/metrics"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/statements"
)

// workCounter counts the work that internal/cql does for each frame, by the bytes it was
// done on: a request's and its response's are told apart, and a copy of a frame counts as
// the frame. The counting is in cql itself (cql.CountWork), so that no reader escapes it,
// not even one that takes its own decompressor.
type workCounter struct {
	mu sync.Mutex
	n  map[cql.Work]map[string]int
}

func newWorkCounter(t *testing.T) *workCounter {
	w := &workCounter{n: map[cql.Work]map[string]int{cql.WorkDecompress: {}, cql.WorkParse: {}, cql.WorkResponse: {}, cql.WorkResult: {}}}
	t.Cleanup(cql.CountWork(func(k cql.Work, b []byte) {
		w.mu.Lock()
		w.n[k][string(b)]++
		w.mu.Unlock()
	}))
	return w
}

// take returns how often work k was done on b, and forgets it.
func (w *workCounter) take(k cql.Work, b []byte) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := w.n[k][string(b)]
	delete(w.n[k], string(b))
	return n
}

// takeAll returns how often work k was done since the last takeAll of k, on any bytes, and
// forgets it: for the reading of a response, whose frame may change under its readers (a
// sampled response's tracing id stripped) while its message stays.
func (w *workCounter) takeAll(k cql.Work) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for b, c := range w.n[k] {
		n += c
		delete(w.n[k], b)
	}
	return n
}

// TestDecodedOnce: whatever the tracing mode, with statement statistics and the audit log or not, a trace
// filter that reads the statement or not, and a workload capture or not, at protocol v4 (compressed with lz4 or
// snappy, or not) and v5, a request is decompressed at most once between its arrival and
// the end of its response, and so is its compressed response; the request is parsed
// (its statement, query parameters and BATCH) at most once; and the response is read
// (an ERROR's code and message, a RESULT's kind, rows, prepared id) at most once, and
// decoded whole at most once. Every reader (the system-table
// rewrite, the EXECUTE learner, statement statistics, the trace filter, tracing's Begin
// and End, a slow fast-mode request's record, the capture, the stripping of a sampled
// response's tracing id) reads the one view.
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
	sysID := []byte("system-local-id!")
	local := rowsBody("local", localColumns(), false,
		[][]byte{text("local"), text("dc"), ip("10.0.0.1"), port(9042), ip("10.0.0.1")})
	localRows, err := cql.DecodeResult(local, cql.V4)
	if err != nil {
		t.Fatal(err)
	}
	values := cql.QueryParams{Consistency: cql.LocalQuorum, Flags: cql.QueryValues | cql.QueryPageSize | cql.QuerySerialConsistency,
		Values: []cql.Value{{Bytes: []byte("key")}, {Bytes: nil}}, PageSize: 100, SerialConsistency: cql.LocalSerial}
	exchanges := []exchange{
		{"insert", cql.Query{Query: insertQuery(1024), Params: cql.QueryParams{Consistency: cql.One}}, cql.VoidResult{}},
		{"select local", cql.Query{Query: "SELECT * FROM system.local WHERE key = 'local'", Params: cql.QueryParams{Consistency: cql.One}}, localRows},
		{"long select", cql.Query{Query: longSelect(), Params: values}, cql.VoidResult{}},
		{"prepare", cql.Prepare{Query: "SELECT * FROM ks.t WHERE k = ?"},
			cql.PreparedResult{ID: []byte("user-statement-1"), ResultMetadata: cql.RowsMetadata{Columns: localColumns()}}},
		{"execute", cql.Execute{ID: sysID, ResultMetadataID: []byte("md"), Params: cql.QueryParams{Consistency: cql.One}}, localRows},
		{"execute values", cql.Execute{ID: []byte("user-statement-1"), ResultMetadataID: []byte("md"), Params: values}, cql.VoidResult{}},
		{"batch", cql.Batch{Queries: []cql.BatchQuery{{Query: "INSERT INTO ks.t (k) VALUES (1)"},
			{Prepared: true, ID: []byte("user-statement-1"), Values: []cql.Value{{Bytes: []byte("k")}}}}, Consistency: cql.One}, cql.VoidResult{}},
		{"select rows", cql.Query{Query: "SELECT v FROM ks.t WHERE k = 1", Params: cql.QueryParams{Consistency: cql.One}}, localRows},
		{"error", cql.Query{Query: "SELECT * FROM ks.gone", Params: cql.QueryParams{Consistency: cql.One}},
			cql.Error{Code: cql.ErrCodeInvalid, Message: "unconfigured table gone"}},
	}
	filters := []struct {
		name string
		f    map[string]string
	}{
		{"no filter", nil},
		{"keyspace filter", map[string]string{"keyspace": "ks"}},
		{"statement filter", map[string]string{"statement": "SELECT"}},
	}
	wires := []struct {
		name    string
		version byte
		comp    int32 // index in compressors: 0 none, 1 lz4, 2 snappy
	}{
		{"v4/lz4", cql.V4, 1}, {"v4/snappy", cql.V4, 2}, {"v4/plain", cql.V4, 0},
		{"v5", cql.V5, 0}, // v5 compresses segments, never frames
	}
	for _, wire := range wires {
		for _, m := range modes {
			for _, fl := range filters {
				for i := range 4 {
					stats, capt := i&1 != 0, i&2 != 0
					name := wire.name + "/" + m.name + "/" + fl.name
					if stats {
						name += "/statements+audit"
					}
					if capt {
						name += "/capture"
					}
					t.Run(name, func(t *testing.T) {
						wc := newWorkCounter(t)
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
						st.SetEnabled(stats)
						c := fuzzConn(wire.comp)
						c.sh = NewShared(Settings{Tracer: tr, Log: &nopLogger, MaxFrame: cql.DefaultMaxFrameSize, Statements: st, Metrics: metrics.New()})
						c.sh.rememberStmt(sysID, kindLocal, localColumns())
						if stats { // and the audit log, every category audited
							l := audit.New(audit.Drop, 64)
							l.Set(audit.Settings{Enabled: true, Categories: allCategories()})
							t.Cleanup(func() { l.Close(context.Background()) })
							c.sh.Audit = l
						}
						dir := filepath.Join(t.TempDir(), "captures")
						cp := capture.New(capture.Config{Dir: dir, Statements: c.sh.Prepared})
						t.Cleanup(func() { cp.Close(context.Background()) })
						if err := capture.CheckDir(dir); err != nil {
							t.Fatal(err)
						}
						if capt {
							if _, err := cp.Start(capture.Options{}); err != nil {
								t.Fatal(err)
							}
							c.sh.Capture = cp
						}
						ap := netip.MustParseAddrPort("127.0.0.1:1")
						c.ClientAddr, c.NodeAddr = ap, ap
						t.Cleanup(c.EndTracing)
						comp := compressors[wire.comp]

						for i, ex := range exchanges {
							stream := int16(i + 1)
							var flags byte
							if m.client {
								flags = cql.FlagTracing
							}
							reqF, err := cql.AppendFrameCompressed(nil, cql.Header{Version: wire.version, Flags: flags, Stream: stream}, ex.req, comp)
							if err != nil {
								t.Fatal(err)
							}
							h, _ := cql.ParseHeader(reqF)
							sentBody := string(reqF[cql.HeaderSize:])
							msg := ex.req.AppendBody(nil, wire.version)
							if tk, _ := c.Request(h, reqF, len(reqF), nil); tk.Events() {
								c.Wrote([]tracing.Ticket{tk}, false)
							}
							req, ok, _ := c.Streams.Take(stream)
							if !ok {
								t.Fatalf("%s: not in flight", ex.name)
							}
							// The node answers with a tracing id when the forwarded request asked for one.
							rh := cql.Header{Version: cql.ResponseBit | wire.version, Stream: stream}
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
							now := tracing.Now()
							out, done := c.Response(rh, respF, &req, &now)
							if done.Events() {
								c.Wrote([]tracing.Ticket{done}, true)
							}
							if len(out) < cql.HeaderSize {
								t.Fatalf("%s: response of %d bytes forwarded", ex.name, len(out))
							}
							if n := wc.take(cql.WorkDecompress, []byte(sentBody)); n > 1 {
								t.Errorf("%s: request decompressed %d times; want at most once", ex.name, n)
							}
							if n := wc.take(cql.WorkDecompress, respF[cql.HeaderSize:]); n > 1 {
								t.Errorf("%s: response decompressed %d times; want at most once", ex.name, n)
							}
							if n := wc.take(cql.WorkParse, msg); n > 1 {
								t.Errorf("%s: request parsed %d times; want at most once", ex.name, n)
							}
							if n := wc.takeAll(cql.WorkResponse); n > 1 {
								t.Errorf("%s: response read %d times; want at most once", ex.name, n)
							}
							if n := wc.takeAll(cql.WorkResult); n > 1 {
								t.Errorf("%s: result decoded whole %d times; want at most once", ex.name, n)
							}
						}
						if !capt {
							return
						}
						// The capture saw every request, parsed at its version: each of its
						// records names its statements.
						done, err := cp.Stop(context.Background())
						if err != nil {
							t.Fatal(err)
						}
						file, err := capturefile.ReadFile(done.Last.File)
						if err != nil {
							t.Fatal(err)
						}
						if len(file.Records) != len(exchanges) {
							t.Fatalf("capture: %d records; want %d", len(file.Records), len(exchanges))
						}
						for i, r := range file.Records {
							if len(r.Parts) == 0 || r.ProtocolVersion != wire.version {
								t.Errorf("capture record %d: %d parts, protocol v%d; want its statements at v%d", i, len(r.Parts), r.ProtocolVersion, wire.version)
							}
						}
					})
				}
			}
		}
	}
}
