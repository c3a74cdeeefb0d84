package capture

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/capturefile"
	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/tracing"
)

// fakeSchema serves one table, ks.users (id text partition key, seq int clustering, name
// text), and fails for any other. A read of a table waits for gate, when set.
type fakeSchema struct{ gate chan struct{} }

func (fakeSchema) Keyspace(_ context.Context, name string) (capturefile.Keyspace, error) {
	return capturefile.Keyspace{Name: name, Replication: map[string]string{"class": "SimpleStrategy", "replication_factor": "1"}, DurableWrites: true}, nil
}

func (f fakeSchema) Table(_ context.Context, ks, table string) (capturefile.Table, error) {
	if f.gate != nil {
		<-f.gate
	}
	if ks != "ks" || table != "users" {
		return capturefile.Table{}, errors.New("unconfigured table " + table)
	}
	return capturefile.Table{Keyspace: ks, Name: table, Columns: []capturefile.Column{
		{Name: "id", Type: "text", Kind: capturefile.PartitionKey, Position: 0, ClusteringOrder: "none"},
		{Name: "seq", Type: "int", Kind: capturefile.Clustering, Position: 0, ClusteringOrder: "asc"},
		{Name: "name", Type: "text", Kind: capturefile.Regular, Position: -1, ClusteringOrder: "none"},
	}}, nil
}

const marker = "MARKER-7f3a9c"

var prepID = []byte{0xde, 0xad, 0xbe, 0xef}

// rig is a capture with a registry that knows one prepared INSERT.
type rig struct {
	c   *Capture
	dir string
}

func mustRig(tb testing.TB) *rig { return mustRigGated(tb, nil) }

func mustRigGated(tb testing.TB, gate chan struct{}) *rig {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "captures")
	if err := CheckDir(dir); err != nil {
		tb.Fatal(err)
	}
	reg := tracing.NewStatements(0)
	reg.Put(prepID, tracing.Statement{Query: "INSERT INTO ks.users (id, seq, name) VALUES (?, ?, ?)", Keyspace: "ks",
		Binds: []cql.ColumnSpec{
			{Keyspace: "ks", Table: "users", Name: "id", Type: cql.Simple(cql.TypeVarchar)},
			{Keyspace: "ks", Table: "users", Name: "seq", Type: cql.Simple(cql.TypeInt)},
			{Keyspace: "ks", Table: "users", Name: "name", Type: cql.Simple(cql.TypeVarchar)},
		}, PKIndexes: []uint16{0}})
	return &rig{c: New(Config{Dir: dir, Statements: reg, Schema: fakeSchema{gate: gate}}), dir: dir}
}

func view(h cql.Header, body []byte) *cql.Frame { return cql.NewFrame(h, body) }

// run sends one request and its response through the capture.
func (r *rig) run(tb testing.TB, op cql.Opcode, body, resp []byte, respOp cql.Opcode) {
	tb.Helper()
	s := r.c.Active()
	if s == nil {
		tb.Fatal("no capture active")
	}
	req := view(cql.Header{Version: cql.V4, Stream: 1, Opcode: op}, body)
	rec := s.Request(req, 1, nil, tracing.Now(), len(req.Raw()))
	s.Response(rec, view(cql.Header{Version: cql.V4 | cql.ResponseBit, Stream: 1, Opcode: respOp}, resp), tracing.Now())
}

func (r *rig) insert(tb testing.TB, id string) {
	tb.Helper()
	body := cql.Execute{ID: prepID, Params: cql.QueryParams{Consistency: cql.LocalOne, Flags: cql.QueryValues,
		Values: []cql.Value{{Bytes: []byte(id)}, {Bytes: []byte{0, 0, 0, 1}}, {Bytes: []byte(marker)}}}}.AppendBody(nil, cql.V4)
	r.run(tb, cql.OpExecute, body, cql.VoidResult{}.AppendBody(nil, cql.V4), cql.OpResult)
}

func (r *rig) query(tb testing.TB, q string) {
	tb.Helper()
	body := cql.Query{Query: q, Params: cql.QueryParams{Consistency: cql.One, Flags: cql.QueryPageSize, PageSize: 100}}.AppendBody(nil, cql.V4)
	rows := cql.RowsResult{Metadata: cql.RowsMetadata{Flags: cql.RowsNoMetadata, ColumnCount: 1}, Rows: [][][]byte{{{1}}, {{2}}}}
	r.run(tb, cql.OpQuery, body, rows.AppendBody(nil, cql.V4), cql.OpResult)
}

func mustStop(tb testing.TB, c *Capture) Result {
	tb.Helper()
	st, err := c.Stop(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	if st.Last == nil || st.Last.Error != "" {
		tb.Fatalf("capture ended with %+v", st.Last)
	}
	return *st.Last
}

// mustContents returns the decompressed entries of a capture file.
func mustContents(tb testing.TB, path string) []byte {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	b, err := capturefile.Contents(f)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestCaptureShape(t *testing.T) {
	r := mustRig(t)
	if _, err := r.c.Start(Options{}); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		r.insert(t, []string{"alice", "bob", "carol"}[i%3])
	}
	r.query(t, "SELECT name FROM ks.users WHERE id = '"+marker+"' LIMIT 10")
	r.query(t, "SELECT name FROM ks.users WHERE id = 'alice'")
	res := mustStop(t, r.c)
	if res.Records != 32 || res.Reason != "stopped" {
		t.Fatalf("result %+v; want 32 records, stopped", res)
	}
	b := mustContents(t, res.File)
	if bytes.Contains(b, []byte(marker)) || bytes.Contains(b, []byte("alice")) {
		t.Errorf("the capture file holds a value with values=shape")
	}
	if fi, _ := os.Stat(res.File); fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v; want 0600", fi.Mode().Perm())
	}
	if fi, _ := os.Stat(r.dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v; want 0700", fi.Mode().Perm())
	}
	c, err := capturefile.ReadFile(res.File)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Tables) != 1 || len(c.Tables[0].Columns) != 3 || len(c.Keyspaces) != 1 {
		t.Fatalf("schema %+v %+v", c.Keyspaces, c.Tables)
	}
	ins := c.Statements[c.Records[0].Parts[0].Statement]
	if !ins.Prepared || ins.Verb != "insert" || len(ins.Values) != 3 || ins.Values[2].Type != "text" || len(ins.PK) != 1 {
		t.Fatalf("insert statement %+v", ins)
	}
	// The keys: alice, bob, carol, each hashed alike every time, and the literal 'alice'
	// of the text hashes as the bound 'alice'.
	keys := map[string]int{}
	for _, rec := range c.Records {
		keys[string(rec.Parts[0].Key)]++
	}
	if len(keys) != 4 {
		t.Errorf("%d distinct keys; want 4 (alice, bob, carol, the marker)", len(keys))
	}
	if a, q := c.Records[0].Parts[0].Key, c.Records[31].Parts[0].Key; !bytes.Equal(a, q) {
		t.Errorf("the literal 'alice' hashes as %x, the bound one as %x", q, a)
	}
	sel := c.Statements[c.Records[30].Parts[0].Statement]
	if sel.Prepared || sel.Text != "SELECT name FROM ks.users WHERE id = ? LIMIT ?" || len(sel.Values) != 2 ||
		sel.Values[0].Literal != "string" || sel.Values[0].Column != "id" || sel.Values[1].Column != "[limit]" {
		t.Fatalf("select statement %+v", sel)
	}
	if rec := c.Records[30]; rec.Rows != 2 || rec.PageSize != 100 || rec.Consistency != int(cql.One) || rec.Parts[0].Lens[0] != int32(len(marker)) {
		t.Errorf("select record %+v", rec)
	}
}

func TestCaptureKeep(t *testing.T) {
	r := mustRig(t)
	st, err := r.c.Start(Options{Values: capturefile.ValuesKeep})
	if err != nil {
		t.Fatal(err)
	}
	if st.Warning != KeepWarning {
		t.Errorf("status warning %q", st.Warning)
	}
	r.insert(t, "alice")
	r.query(t, "SELECT name FROM ks.users WHERE id = '"+marker+"'")
	r.query(t, "ALTER ROLE app WITH PASSWORD = 'hunter2'")
	res := mustStop(t, r.c)
	b := mustContents(t, res.File)
	if n := bytes.Count(b, []byte(marker)); n != 2 {
		t.Errorf("the marker is in the file %d times; want 2 (a bound value and a literal) with values=keep", n)
	}
	if bytes.Contains(b, []byte("hunter2")) {
		t.Errorf("a password is in the file with values=keep")
	}
}

func TestCaptureLimits(t *testing.T) {
	r := mustRig(t)
	if _, err := r.c.Start(Options{Duration: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	r.insert(t, "alice")
	deadline := time.Now().Add(5 * time.Second)
	for r.c.Status().State != "off" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	st := r.c.Status()
	if st.State != "off" || st.Last == nil || st.Last.Reason != "duration" || st.Last.Records != 1 {
		t.Fatalf("status %+v, last %+v; want off by duration with 1 record", st, st.Last)
	}
	if _, err := capturefile.ReadFile(st.Last.File); err != nil {
		t.Error(err)
	}
	matches, _ := filepath.Glob(filepath.Join(r.dir, "*.partial"))
	if len(matches) != 0 {
		t.Errorf("partial files left: %v", matches)
	}
}

// TestCaptureQueueFull holds the writer (in its first read of the schema) while three
// queues' worth of requests arrive: those that do not fit are dropped and counted, and
// every request is either written or counted.
func TestCaptureQueueFull(t *testing.T) {
	gate := make(chan struct{})
	r := mustRigGated(t, gate)
	if _, err := r.c.Start(Options{}); err != nil {
		t.Fatal(err)
	}
	const n = 3 * QueueSize
	for range n {
		r.insert(t, "alice")
	}
	if st := r.c.Status(); st.Dropped < n-QueueSize-1 {
		t.Errorf("status dropped %d while the writer is held; want at least %d", st.Dropped, n-QueueSize-1)
	}
	close(gate)
	res := mustStop(t, r.c)
	if res.Dropped == 0 || res.Records+res.Dropped != n {
		t.Errorf("records %d + dropped %d; want %d, with some dropped", res.Records, res.Dropped, n)
	}
}

func TestCaptureErrors(t *testing.T) {
	if _, err := New(Config{}).Start(Options{}); !errors.Is(err, ErrNoDir) {
		t.Errorf("no dir: %v", err)
	}
	r := mustRig(t)
	for _, o := range []Options{{Duration: -1}, {Duration: 48 * time.Hour}, {MaxBytes: 10}, {Values: "all"}} {
		if _, err := r.c.Start(o); !errors.Is(err, ErrInvalid) {
			t.Errorf("Start(%+v): %v; want ErrInvalid", o, err)
		}
	}
	if _, err := r.c.Start(Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.c.Start(Options{}); !errors.Is(err, ErrRunning) {
		t.Errorf("second start: %v; want ErrRunning", err)
	}
	mustStop(t, r.c)

	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	for _, dir := range []string{file, filepath.Join(file, "sub")} {
		err := CheckDir(dir)
		if !errors.Is(err, ErrDir) || !strings.Contains(err.Error(), dir) {
			t.Errorf("CheckDir(%s) = %v; want ErrDir naming it", dir, err)
		}
		_, err = New(Config{Dir: dir}).Start(Options{})
		if !errors.Is(err, ErrDir) || !strings.Contains(err.Error(), dir) {
			t.Errorf("Start in %s = %v; want ErrDir naming it", dir, err)
		}
	}
}

func TestSlotColumns(t *testing.T) {
	tests := []struct {
		raw  string
		want []string
	}{
		{"SELECT * FROM t WHERE a = 1 AND b > ? AND c IN (?, 'x') LIMIT 5", []string{"a", "b", "c", "c", "[limit]"}},
		{"INSERT INTO t (a, \"B\", c) VALUES (?, [1, 2], 'z') USING TTL 60", []string{"a", "B", "c", "[ttl]"}},
		{"UPDATE t SET n = n + 1, m = ? WHERE k = :key", []string{"n", "m", "k"}},
	}
	for _, tt := range tests {
		norm, _ := cql.NormalizeQuery(tt.raw, false, 0)
		sl := slotsOf(tt.raw, norm)
		got := slotColumns(norm, sl)
		if strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("%s: columns %q; want %q (normalized %s, slots %+v)", tt.raw, got, tt.want, norm, sl)
		}
	}
}

// BenchmarkWriterRecord is the writer's work on one captured EXECUTE (three bound
// values, a key hashed): what a capture costs the sidecar per request, off the data path.
func BenchmarkWriterRecord(b *testing.B) {
	r := mustRig(b)
	if _, err := r.c.Start(Options{MaxBytes: 1 << 40, Duration: MaxDuration}); err != nil {
		b.Fatal(err)
	}
	s := r.c.Active()
	r.c.mu.Lock()
	w := r.c.cur
	r.c.mu.Unlock()
	w.stop("stopped") // the writer's goroutine ends; the benchmark drives write itself
	<-s.done
	w.w, _ = capturefile.NewWriter(io.Discard)
	w.mac = hmac.New(sha256.New, []byte("a key"))
	body := cql.Execute{ID: prepID, Params: cql.QueryParams{Consistency: cql.LocalOne, Flags: cql.QueryValues,
		Values: []cql.Value{{Bytes: []byte("alice")}, {Bytes: []byte{0, 0, 0, 1}}, {Bytes: []byte(marker)}}}}.AppendBody(nil, cql.V4)
	req := view(cql.Header{Version: cql.V4, Stream: 1, Opcode: cql.OpExecute}, body)
	resp := view(cql.Header{Version: cql.V4 | cql.ResponseBit, Stream: 1, Opcode: cql.OpResult}, cql.VoidResult{}.AppendBody(nil, cql.V4))
	rec := s.Request(req, 1, nil, tracing.Now(), len(req.Raw()))
	rec.respOp, rec.rows = resp.Header.Opcode, -1
	b.ReportAllocs()
	for b.Loop() {
		if err := w.write(rec); err != nil {
			b.Fatal(err)
		}
		if w.w.Pending() > 512<<10 {
			w.w.Flush()
		}
	}
}
