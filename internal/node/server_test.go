package node_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/internal/testkit/drivertest"
)

// mustServe starts a node on 127.0.0.1:0 and stops it when the test ends.
func mustServe(tb testing.TB, cfg node.Config) (*node.Server, netip.AddrPort) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := node.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("Serve: %v", err)
		}
	})
	return srv, netip.MustParseAddrPort(ln.Addr().String())
}

func options(ap netip.AddrPort, comp string) drivertest.Options {
	return drivertest.Options{Host: ap.Addr().String(), Port: int(ap.Port()), Compression: comp}
}

func TestGocqlSuite(t *testing.T) {
	_, ap := mustServe(t, node.Config{})
	for _, comp := range []string{"none", "lz4", "snappy"} {
		t.Run(comp, func(t *testing.T) { drivertest.RunGocql(t, options(ap, comp)) })
	}
}

func TestPythonDriverSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("driver suites are slow")
	}
	_, ap := mustServe(t, node.Config{})
	for _, comp := range []string{"none", "lz4", "snappy"} {
		t.Run(comp, func(t *testing.T) {
			o := options(ap, comp)
			o.Keyspace = "py_" + comp
			o.Protocol = 5 // the driver tries v5 first, and the node speaks it as Cassandra 4.1 does
			drivertest.RunPython(t, o)
		})
	}
}

func TestNodeJSDriverSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("driver suites are slow")
	}
	_, ap := mustServe(t, node.Config{})
	drivertest.RunNodeJS(t, options(ap, "none"))
}

func TestAuth(t *testing.T) {
	_, ap := mustServe(t, node.Config{Auth: "cassandra:secret"})
	tests := []struct {
		name, user, pass string
		wantErr          bool
	}{
		{"right password", "cassandra", "secret", false},
		{"wrong password", "cassandra", "nope", true},
		{"no credentials", "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := options(ap, "none")
			o.User, o.Pass = tt.user, tt.pass
			c := drivertest.Cluster(o)
			c.ConnectTimeout = 3 * time.Second
			s, err := c.CreateSession()
			if (err != nil) != tt.wantErr {
				t.Fatalf("CreateSession: got err %v; want error %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			defer s.Close()
			var rv string
			if err := s.Query("SELECT release_version FROM system.local").Scan(&rv); err != nil || rv != "4.1.0" {
				t.Fatalf("release_version: got %q, %v; want 4.1.0", rv, err)
			}
		})
	}
}

func TestAuthPython(t *testing.T) {
	if testing.Short() {
		t.Skip("driver suites are slow")
	}
	_, ap := mustServe(t, node.Config{Auth: "cassandra:secret"})
	o := options(ap, "lz4")
	o.User, o.Pass, o.Keyspace = "cassandra", "secret", "py_auth"
	o.Protocol = 5 // AUTHENTICATE starts the segments, AUTH_RESPONSE is the first
	drivertest.RunPython(t, o)
}

func dial(tb testing.TB, ap netip.AddrPort) net.Conn {
	tb.Helper()
	c, err := net.DialTimeout("tcp", ap.String(), 5*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	tb.Cleanup(func() { c.Close() })
	return c
}

func TestProtocolVersionGate(t *testing.T) {
	_, ap := mustServe(t, node.Config{})
	tests := []struct {
		name      string
		frame     []byte
		headerLen int
		wantVer   byte
		wantMsg   string
	}{
		{"v6", []byte{0x06, 0, 0, 7, byte(cql.OpOptions), 0, 0, 0, 0}, 9, 0x84, "Invalid or unsupported protocol version (6); the lowest supported version is 3 and the greatest is 5"},
		{"DSE v2", []byte{0x42, 0, 0, 1, byte(cql.OpOptions), 0, 0, 0, 0}, 9, 0x84, "Invalid or unsupported protocol version (66)"},
		{"v2", []byte{0x02, 0, 3, byte(cql.OpOptions), 0, 0, 0, 0}, 8, 0x82, "Invalid or unsupported protocol version (2)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, ap)
			if _, err := c.Write(tt.frame); err != nil {
				t.Fatal(err)
			}
			hdr := make([]byte, tt.headerLen)
			if _, err := io.ReadFull(c, hdr); err != nil {
				t.Fatalf("read header: %v", err)
			}
			if hdr[0] != tt.wantVer {
				t.Errorf("version byte: got %#x; want %#x", hdr[0], tt.wantVer)
			}
			body := make([]byte, binary.BigEndian.Uint32(hdr[tt.headerLen-4:]))
			if _, err := io.ReadFull(c, body); err != nil {
				t.Fatalf("read body: %v", err)
			}
			e, err := cql.DecodeError(body)
			if err != nil {
				t.Fatal(err)
			}
			if e.Code != cql.ErrCodeProtocol || !strings.Contains(e.Message, tt.wantMsg) {
				t.Errorf("got error %#x %q; want ProtocolError containing %q", e.Code, e.Message, tt.wantMsg)
			}
		})
	}
}

// reply is a frame a hostile client received: its stream, its opcode, and for an ERROR
// its code and message.
type reply struct {
	stream int16
	op     cql.Opcode
	code   int32
	msg    string
}

func (r reply) String() string {
	if r.op == cql.OpError {
		return fmt.Sprintf("stream %d ERROR %#x %q", r.stream, r.code, r.msg)
	}
	return fmt.Sprintf("stream %d %s", r.stream, r.op)
}

// badFrame is a hostile client's bytes and what the node must answer.
type badFrame struct {
	name  string
	bytes []byte
	// halfClose ends the client's side after the bytes: a truncated frame waits for more
	// otherwise, as in Cassandra.
	halfClose bool
	want      []reply // the frames the client receives
	// keepsOpen says that the frame boundaries were intact, so the connection stays usable
	// after the error; otherwise the node closes it.
	keepsOpen bool
}

func badFrames() []badFrame {
	const protocol = cql.ErrCodeProtocol
	ready := reply{stream: 0, op: cql.OpReady}
	startup := cql.AppendFrame(nil, cql.Header{Version: cql.V4}, cql.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0"}})
	query1 := cql.AppendFrame(nil, cql.Header{Version: cql.V4, Stream: 1}, cql.Query{Query: "SELECT * FROM system.local", Params: cql.QueryParams{Consistency: cql.One}})
	return []badFrame{
		{name: "truncated header", bytes: []byte{0x04, 0, 0}, halfClose: true},
		{name: "truncated body", bytes: append(cql.AppendHeader(nil, cql.Header{Version: cql.V4, Opcode: cql.OpQuery, Length: 100}), 1, 2, 3), halfClose: true},
		{name: "oversized length", bytes: cql.AppendHeader(nil, cql.Header{Version: cql.V4, Stream: 5, Opcode: cql.OpQuery, Length: 0x7fffffff}),
			want: []reply{{stream: 5, op: cql.OpError, code: protocol, msg: cql.FrameTooBigMessage(0x7fffffff, cql.MaxStartupFrameSize)}}},
		// "G" is read as version 0x47, "E" as flags and "T " as the stream.
		{name: "garbage", bytes: []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
			want: []reply{{stream: 0x5420, op: cql.OpError, code: protocol, msg: cql.UnsupportedVersionMessage(0x47, cql.V5)}}},
		{name: "lying query body", bytes: append(startup, append(cql.AppendHeader(nil, cql.Header{Version: cql.V4, Stream: 2, Opcode: cql.OpQuery, Length: 6}), 0xff, 0xff, 0xff, 0xff, 0, 1)...),
			want: []reply{ready, {stream: 2, op: cql.OpError, code: protocol, msg: "Invalid message body: cql: malformed message"}}, keepsOpen: true},
		{name: "compressed without negotiation", bytes: append(startup, func() []byte {
			f := append([]byte(nil), query1...)
			f[1] |= cql.FlagCompression
			return f
		}()...),
			want: []reply{ready, {stream: 1, op: cql.OpError, code: protocol, msg: "Frame is compressed but no compression was negotiated in STARTUP"}}},
		{name: "response frame from a client", bytes: cql.AppendFrame(nil, cql.Header{Version: cql.ResponseBit | cql.V4, Stream: 4}, cql.Ready{}),
			want: []reply{{stream: 4, op: cql.OpError, code: protocol, msg: "Invalid frame: a client sent a response frame"}}},
		{name: "unknown opcode", bytes: append(startup, cql.AppendHeader(nil, cql.Header{Version: cql.V4, Stream: 3, Opcode: 0x42})...),
			want: []reply{ready, {stream: 3, op: cql.OpError, code: protocol, msg: "Unexpected message OPCODE(0x42)"}}, keepsOpen: true},
	}
}

// checkBadFrame sends tt's bytes on a connection of their own and returns an error unless
// the node answers with tt.want, and then closes the connection, or serves another query on
// it when tt.keepsOpen. The dial's deadline bounds every wait.
func checkBadFrame(tb testing.TB, ap netip.AddrPort, tt badFrame) error {
	c := dial(tb, ap)
	if _, err := c.Write(tt.bytes); err != nil {
		return err
	}
	if tt.halfClose {
		c.(*net.TCPConn).CloseWrite()
	}
	r := bufio.NewReader(c)
	var buf []byte
	next := func() (reply, error) {
		h, body, b, err := cql.ReadFrame(r, buf)
		buf = b
		if err != nil {
			return reply{}, err
		}
		rp := reply{stream: h.Stream, op: h.Opcode}
		if h.Opcode == cql.OpError {
			e, err := cql.DecodeError(body)
			if err != nil {
				return rp, fmt.Errorf("decode the ERROR on stream %d: %w", h.Stream, err)
			}
			rp.code, rp.msg = e.Code, e.Message
		}
		return rp, nil
	}
	var got []reply
	for range tt.want {
		rp, err := next()
		if err != nil {
			return fmt.Errorf("received %v, then %v; want %v", got, err, tt.want)
		}
		got = append(got, rp)
	}
	if !slices.Equal(got, tt.want) {
		return fmt.Errorf("received %v; want %v", got, tt.want)
	}
	if tt.keepsOpen {
		q := cql.AppendFrame(nil, cql.Header{Version: cql.V4, Stream: 9}, cql.Query{Query: "SELECT release_version FROM system.local", Params: cql.QueryParams{Consistency: cql.One}})
		if _, err := c.Write(q); err != nil {
			return fmt.Errorf("a query after the error: %w", err)
		}
		if rp, err := next(); err != nil || rp.stream != 9 || rp.op != cql.OpResult {
			return fmt.Errorf("a query after the error got %v, %v; want a RESULT on stream 9", rp, err)
		}
		c.(*net.TCPConn).CloseWrite()
	}
	switch rp, err := next(); {
	case errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET):
		return nil
	case err == nil:
		return fmt.Errorf("received %v after %v; want the connection closed", rp, got)
	default:
		return fmt.Errorf("after %v: %w; want the connection closed", got, err)
	}
}

// healthySession queries through s until stop is closed, and then returns the number of
// queries done and the first error.
func healthySession(s *gocql.Session, stop <-chan struct{}) (done <-chan struct{}, result func() (int64, error)) {
	var n atomic.Int64
	var first error
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		for {
			select {
			case <-stop:
				return
			default:
			}
			var rv string
			if err := s.Query("SELECT release_version FROM system.local").Scan(&rv); err != nil {
				first = err
				return
			}
			n.Add(1)
		}
	}()
	return ch, func() (int64, error) { <-ch; return n.Load(), first }
}

// TestBadFramesCloseOnlyTheirConnection feeds truncated, oversized and garbage frames on
// their own connections, and checks what each connection received, a ProtocolError with
// Cassandra's text on the offending frame's stream and then a close, or a close alone, while
// a driver session queries all along without an error.
func TestBadFramesCloseOnlyTheirConnection(t *testing.T) {
	_, ap := mustServe(t, node.Config{})
	s, err := drivertest.Cluster(options(ap, "none")).CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	stop := make(chan struct{})
	_, result := healthySession(s, stop)
	for _, tt := range badFrames() {
		t.Run(tt.name, func(t *testing.T) {
			if err := checkBadFrame(t, ap, tt); err != nil {
				t.Error(err)
			}
		})
	}
	close(stop)
	n, err := result()
	if err != nil {
		t.Errorf("the healthy session got an error while the hostile connections were served: %v", err)
	}
	if n == 0 {
		t.Errorf("the healthy session ran no query")
	}
}

// TestBadFramesCatchesDroppedErrors is the mutation check: with ProtocolErrors dropped, every
// case that expects one must fail checkBadFrame.
func TestBadFramesCatchesDroppedErrors(t *testing.T) {
	was := node.SetDropProtocolErrors(true)
	t.Cleanup(func() { node.SetDropProtocolErrors(was) })
	_, ap := mustServe(t, node.Config{})
	for _, tt := range badFrames() {
		err := checkBadFrame(t, ap, tt)
		if expectsError := slices.ContainsFunc(tt.want, func(r reply) bool { return r.code == cql.ErrCodeProtocol }); !expectsError {
			if err != nil {
				t.Errorf("%s (no error expected): %v", tt.name, err)
			}
			continue
		}
		// Two errors take other paths than sendError: the garbage is rejected by its version
		// before any message is read, and the lying body's error comes from the engine.
		if tt.name == "garbage" || tt.name == "lying query body" {
			continue
		}
		if err == nil {
			t.Errorf("%s: checkBadFrame passed with ProtocolErrors dropped; want it to fail", tt.name)
		} else {
			t.Logf("%s fails as it should: %v", tt.name, err)
		}
	}
}

func TestTraceProbability(t *testing.T) {
	srv, ap := mustServe(t, node.Config{})
	if err := srv.SetTraceProbability(1.5); err == nil {
		t.Fatalf("SetTraceProbability(1.5): got nil error")
	}
	if err := srv.SetTraceProbability(1); err != nil {
		t.Fatal(err)
	}
	s, err := drivertest.Cluster(options(ap, "none")).CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var before, after int
	if err := s.Query("SELECT count(*) FROM system_traces.sessions").Scan(&before); err != nil {
		t.Fatal(err)
	}
	if err := s.Query("SELECT count(*) FROM system_traces.sessions").Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after <= before {
		t.Fatalf("with probability 1, sessions went from %d to %d; want growth", before, after)
	}
}
