package tracing

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/internal/cql"
)

var (
	testClient = netip.MustParseAddrPort("127.0.0.1:50123")
	testCoord  = netip.MustParseAddrPort("127.0.0.1:9042")
	testID     = []byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	testQuery  = "SELECT * FROM keyspace1.standard1 WHERE key = ?"
	nodeID     = [16]byte{0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x11, 0xe6, 0x88, 0x35, 0, 0, 0, 0, 0, 0x01}
)

// reqHeader returns a v4 request header on stream.
func reqHeader(stream int16, flags byte) cql.Header {
	return cql.Header{Version: cql.V4, Flags: flags, Stream: stream}
}

// respHeader returns a v4 response header on stream.
func respHeader(stream int16, flags byte) cql.Header {
	return cql.Header{Version: cql.V4 | cql.ResponseBit, Flags: flags, Stream: stream}
}

// mustRequest encodes m as a request frame, compressed with comp when not nil, and returns
// the parsed header and the frame.
func mustRequest(tb testing.TB, h cql.Header, m cql.Message, comp cql.Compressor) (cql.Header, []byte) {
	tb.Helper()
	f, err := cql.AppendRequestFrame(nil, h, nil, m, comp)
	if err != nil {
		tb.Fatalf("encode request: %v", err)
	}
	return mustHeader(tb, f), f
}

// mustResponse encodes m as a response frame with prefix p (parts chosen by h.Flags).
func mustResponse(tb testing.TB, h cql.Header, p cql.ResponsePrefix, m cql.Message, comp cql.Compressor) (cql.Header, []byte) {
	tb.Helper()
	f, err := cql.AppendResponseFrame(nil, h, p, m, comp)
	if err != nil {
		tb.Fatalf("encode response: %v", err)
	}
	return mustHeader(tb, f), f
}

func mustHeader(tb testing.TB, f []byte) cql.Header {
	tb.Helper()
	h, err := cql.ParseHeader(f)
	if err != nil {
		tb.Fatalf("parse header: %v", err)
	}
	return h
}

func executeMsg(values ...[]byte) cql.Execute {
	vs := make([]cql.Value, len(values))
	for i, v := range values {
		vs[i] = cql.Value{Bytes: v}
	}
	return cql.Execute{ID: testID, Params: cql.QueryParams{
		Consistency: cql.LocalOne, Flags: cql.QueryValues | cql.QueryPageSize, Values: vs, PageSize: 5000,
	}}
}

func rowsMsg() cql.RowsResult {
	cols := []cql.ColumnSpec{
		{Keyspace: "keyspace1", Table: "standard1", Name: "key", Type: cql.Simple(cql.TypeBlob)},
		{Keyspace: "keyspace1", Table: "standard1", Name: "C0", Type: cql.Simple(cql.TypeBlob)},
	}
	return cql.RowsResult{
		Metadata: cql.RowsMetadata{Flags: cql.RowsGlobalTableSpec, Columns: cols},
		Rows:     [][][]byte{{[]byte("key-0001"), make([]byte, 34)}},
	}
}

// prepare teaches c's tracer testQuery under testID through a PREPARE exchange on stream.
func prepare(tb testing.TB, c *caller, stream int16) {
	tb.Helper()
	h, f := mustRequest(tb, reqHeader(stream, 0), cql.Prepare{Query: testQuery}, nil)
	c.OnRequest(h, f, nil)
	rh, rf := mustResponse(tb, respHeader(stream, 0), cql.ResponsePrefix{}, cql.PreparedResult{ID: testID}, nil)
	c.OnResponse(rh, rf, nil)
}

// mustConfig installs cfg.
func mustConfig(tb testing.TB, tr *Tracer, cfg Config) {
	tb.Helper()
	if err := tr.SetConfig(cfg); err != nil {
		tb.Fatalf("SetConfig(%+v): %v", cfg, err)
	}
}

// mustClose closes tr, which flushes the fetcher and the sinks.
func mustClose(tb testing.TB, tr *Tracer) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tr.Close(ctx); err != nil {
		tb.Fatalf("Close: %v", err)
	}
}

// memSink collects sessions. When block is not nil, Write waits on it.
type memSink struct {
	name  string
	block chan struct{}
	mu    sync.Mutex
	got   []*Session
}

func (m *memSink) Name() string { return m.name }

func (m *memSink) Write(ctx context.Context, s *Session) error {
	if m.block != nil {
		select {
		case <-m.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	m.mu.Lock()
	m.got = append(m.got, s)
	m.mu.Unlock()
	return nil
}

func (m *memSink) Close(context.Context) error { return nil }

func (m *memSink) sessions() []*Session {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*Session(nil), m.got...)
}

// fakeNode is a NodeEventSource that reports every session finished from its nth look (a
// Finished call) on, each with events.
type fakeNode struct {
	mu       sync.Mutex
	looks    int        // Finished calls
	complete int        // the look (1-based) from which sessions are finished
	events   []Event    // every session's
	asked    [][16]byte // the ids whose events were read, in order
}

func (f *fakeNode) Finished(_ context.Context, ids [][16]byte) ([]bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.looks++
	done := make([]bool, len(ids))
	for i := range done {
		done[i] = f.looks >= f.complete
	}
	return done, nil
}

func (f *fakeNode) Events(_ context.Context, ids [][16]byte) ([][]Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, ids...)
	evs := make([][]Event, len(ids))
	for i := range evs {
		evs[i] = f.events
	}
	return evs, nil
}

func activities(evs []Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Source + ":" + e.Activity
	}
	return out
}

func nopLogger() zerolog.Logger { return zerolog.Nop() }

// caller drives a Conn as the sidecar does: it keeps each request's Ticket with its own
// record of the request in flight, by stream id, calls Sent and Done after its "writes",
// and learns prepared statements into the Tracer's registry from PREPARE exchanges. The
// two sides may run on two goroutines, as in the sidecar.
type caller struct {
	*Conn
	mu       sync.Mutex
	inflight map[int16]Ticket
	answered map[int16]Ticket
	prepared map[int16]string // the query of a PREPARE in flight
}

func newCaller(tr *Tracer, client, coord netip.AddrPort) *caller {
	return &caller{Conn: tr.NewConn(client, coord), inflight: map[int16]Ticket{}, answered: map[int16]Ticket{}, prepared: map[int16]string{}}
}

func (k *caller) OnRequest(h cql.Header, f []byte, comp cql.Compressor) { k.OnRequestAt(h, f, comp, 0) }

func (k *caller) OnRequestAt(h cql.Header, f []byte, comp cql.Compressor, now int64) {
	q, isPrepare := "", h.Opcode == cql.OpPrepare
	if isPrepare {
		if body, err := view(h, f, comp).Body(); err == nil {
			var d cql.Decoder
			d.Reset(body)
			q = d.LongString()
		}
	}
	t := k.Begin(view(h, f, comp), now)
	k.mu.Lock()
	k.inflight[h.Stream] = t
	if isPrepare {
		k.prepared[h.Stream] = q
	}
	k.mu.Unlock()
}

func (k *caller) Sent(stream int16) {
	k.mu.Lock()
	t := k.inflight[stream]
	k.mu.Unlock()
	t.Sent(Now())
}

func (k *caller) OnResponse(h cql.Header, f []byte, comp cql.Compressor) []byte {
	return k.OnResponseAt(h, f, comp, 0)
}

func (k *caller) OnResponseAt(h cql.Header, f []byte, comp cql.Compressor, now int64) []byte {
	k.mu.Lock()
	t := k.inflight[h.Stream]
	delete(k.inflight, h.Stream)
	q, isPrepare := k.prepared[h.Stream]
	delete(k.prepared, h.Stream)
	k.mu.Unlock()
	if isPrepare && h.Opcode == cql.OpResult {
		if body, err := view(h, f, comp).Body(); err == nil {
			if _, body, err = cql.ParseResponsePrefix(h.Flags, body); err == nil {
				if p, ok := cql.ReadPrepared(body, h.ProtoVersion()); ok {
					k.t.Statements().Put(p.ID, Statement{Query: q, Keyspace: string(p.Keyspace)})
				}
			}
		}
	}
	out, t := k.End(t, view(h, f, comp), now)
	if t.Events() {
		k.mu.Lock()
		k.answered[h.Stream] = t
		k.mu.Unlock()
	}
	return out
}

func (k *caller) ResponseSent(stream int16) {
	k.mu.Lock()
	t, ok := k.answered[stream]
	delete(k.answered, stream)
	k.mu.Unlock()
	if ok {
		k.Done(t, 0)
	}
}

// view is the view of frame, as the sidecar builds it.
func view(h cql.Header, frame []byte, comp cql.Compressor) *cql.Frame {
	f := new(cql.Frame)
	f.Reset(h, frame, comp)
	return f
}
