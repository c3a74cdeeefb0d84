package node_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/tracecar/tracecar/cql"
	"github.com/tracecar/tracecar/internal/drivertest"
	"github.com/tracecar/tracecar/node"
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
		{"v5", []byte{0x05, 0, 0, 7, byte(cql.OpOptions), 0, 0, 0, 0}, 9, 0x84, "Invalid or unsupported protocol version (5); the lowest supported version is 3 and the greatest is 4"},
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

// TestBadFramesCloseOnlyTheirConnection feeds truncated, oversized and garbage frames on
// their own connections while a driver session keeps working.
func TestBadFramesCloseOnlyTheirConnection(t *testing.T) {
	_, ap := mustServe(t, node.Config{})
	s, err := drivertest.Cluster(options(ap, "none")).CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	query := func() {
		t.Helper()
		var rv string
		if err := s.Query("SELECT release_version FROM system.local").Scan(&rv); err != nil {
			t.Fatalf("healthy session: %v", err)
		}
	}
	startup := cql.AppendFrame(nil, cql.Header{Version: cql.V4}, cql.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0"}})
	query7 := cql.AppendFrame(nil, cql.Header{Version: cql.V4, Stream: 1}, cql.Query{Query: "SELECT * FROM system.local", Params: cql.QueryParams{Consistency: cql.One}})
	cases := []struct {
		name  string
		bytes []byte
	}{
		{"truncated header", []byte{0x04, 0, 0}},
		{"truncated body", append(cql.AppendHeader(nil, cql.Header{Version: cql.V4, Opcode: cql.OpQuery, Length: 100}), 1, 2, 3)},
		{"oversized length", cql.AppendHeader(nil, cql.Header{Version: cql.V4, Opcode: cql.OpQuery, Length: 0x7fffffff})},
		{"garbage", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")},
		{"lying query body", append(startup, append(cql.AppendHeader(nil, cql.Header{Version: cql.V4, Stream: 2, Opcode: cql.OpQuery, Length: 6}), 0xff, 0xff, 0xff, 0xff, 0, 1)...)},
		{"compressed without negotiation", append(startup, func() []byte {
			f := append([]byte(nil), query7...)
			f[1] |= cql.FlagCompression
			return f
		}()...)},
		{"response frame from a client", cql.AppendFrame(nil, cql.Header{Version: cql.ResponseBit | cql.V4}, cql.Ready{})},
		{"unknown opcode", append(startup, cql.AppendHeader(nil, cql.Header{Version: cql.V4, Stream: 3, Opcode: 0x42})...)},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, ap)
			c.Write(tt.bytes)
			if tcp, ok := c.(*net.TCPConn); ok {
				tcp.CloseWrite()
			}
			// Read whatever the node answers until it closes or the deadline passes.
			r := bufio.NewReader(c)
			io.Copy(io.Discard, r)
			query()
		})
	}
	query()
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
