package clustertest_test

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/internal/testkit/clustertest"
	"github.com/tracecar/tracecar/sidecar"
)

// rawConn is a CQL connection that has done STARTUP, for reading events and system tables
// exactly as they arrive.
type rawConn struct {
	nc     net.Conn
	br     *bufio.Reader
	stream int16
}

func dialRaw(tb testing.TB, ap netip.AddrPort) *rawConn {
	tb.Helper()
	nc, err := net.DialTimeout("tcp", ap.String(), 10*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	rc := &rawConn{nc: nc, br: bufio.NewReader(nc)}
	if h, _ := rc.do(tb, cql.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0"}}); h.Opcode != cql.OpReady {
		tb.Fatalf("STARTUP: got %v", h.Opcode)
	}
	return rc
}

// do sends m and returns the response, skipping events.
func (rc *rawConn) do(tb testing.TB, m cql.Message) (cql.Header, []byte) {
	tb.Helper()
	rc.stream++
	if _, err := rc.nc.Write(cql.AppendFrame(nil, cql.Header{Version: cql.V4, Stream: rc.stream, Opcode: m.Opcode()}, m)); err != nil {
		tb.Fatal(err)
	}
	for {
		h, body, _, err := cql.ReadFrame(rc.br, nil)
		if err != nil {
			tb.Fatalf("%v: %v", m.Opcode(), err)
		}
		if h.Stream == rc.stream {
			return h, body
		}
	}
}

// nextEvent returns the next event.
func (rc *rawConn) nextEvent(tb testing.TB) cql.Event {
	tb.Helper()
	for {
		h, body, _, err := cql.ReadFrame(rc.br, nil)
		if err != nil {
			tb.Fatalf("waiting for an event: %v", err)
		}
		if h.Opcode != cql.OpEvent {
			continue
		}
		ev, err := cql.DecodeEvent(body)
		if err != nil {
			tb.Fatal(err)
		}
		return ev
	}
}

// peersV2 reads system.peers_v2 through rc as peer → native_address:native_port.
func (rc *rawConn) peersV2(tb testing.TB) map[string]netip.AddrPort {
	tb.Helper()
	h, body := rc.do(tb, cql.Query{Query: "SELECT peer, native_address, native_port FROM system.peers_v2", Params: cql.QueryParams{Consistency: cql.One}})
	if h.Opcode != cql.OpResult {
		tb.Fatalf("peers_v2: got %v", h.Opcode)
	}
	m, err := cql.DecodeResult(body, cql.V4)
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]netip.AddrPort{}
	for _, row := range m.(cql.RowsResult).Rows {
		peer, _ := netip.AddrFromSlice(row[0])
		addr, _ := netip.AddrFromSlice(row[1])
		port := uint16(row[2][2])<<8 | uint16(row[2][3])
		out[peer.String()] = netip.AddrPortFrom(addr, port)
	}
	return out
}

// TestStatusEventsNameSidecars stops and starts a node behind one sidecar and checks that a
// listener connected through another sidecar hears DOWN and UP about the stopped node's
// sidecar, never about the node.
func TestStatusEventsNameSidecars(t *testing.T) {
	c := clustertest.StartCluster(t, 3, node.ClusterConfig{})
	scs := clustertest.StartSidecars(t, c, sidecar.Config{})
	rc := dialRaw(t, scs[0].Addr)
	if h, _ := rc.do(t, cql.Register{Events: []string{cql.EventStatusChange, cql.EventTopologyChange}}); h.Opcode != cql.OpReady {
		t.Fatalf("REGISTER: got %v", h.Opcode)
	}
	if err := c.Stop(2); err != nil {
		t.Fatal(err)
	}
	if ev := rc.nextEvent(t); ev.Change != "DOWN" || ev.Addr != scs[2].Addr {
		t.Errorf("got %s %s %s; want STATUS_CHANGE DOWN %s (sidecar 3, node 3 is %s)", ev.Type, ev.Change, ev.Addr, scs[2].Addr, c.Addr(2))
	}
	if err := c.Start(2); err != nil {
		t.Fatal(err)
	}
	if ev := rc.nextEvent(t); ev.Change != "UP" || ev.Addr != scs[2].Addr {
		t.Errorf("got %s %s %s; want STATUS_CHANGE UP %s", ev.Type, ev.Change, ev.Addr, scs[2].Addr)
	}
}

// TestPeerMap puts the sidecars on other IPs than their nodes, where the convention does
// not hold, with a map from node to sidecar addresses: peers_v2 and events name the
// sidecars, and gocql discovers the three sidecars and no node.
func TestPeerMap(t *testing.T) {
	c := clustertest.StartCluster(t, 3, node.ClusterConfig{})
	lns := clustertest.ListenOn(t, []netip.Addr{clustertest.IP(11), clustertest.IP(12), clustertest.IP(13)})
	var lines []string
	for i, ln := range lns {
		lines = append(lines, fmt.Sprintf("%s %s # node %d", c.Addr(i), ln.Addr(), i+1))
	}
	pm, err := sidecar.ParsePeerMap(strings.Join(lines, "\n"))
	if err != nil {
		t.Fatal(err)
	}
	scs := clustertest.StartSidecarsOn(t, c, lns, sidecar.Config{Peers: pm})

	rc := dialRaw(t, scs[0].Addr)
	peers := rc.peersV2(t)
	want := map[string]netip.AddrPort{"127.0.0.12": scs[1].Addr, "127.0.0.13": scs[2].Addr}
	if fmt.Sprint(peers) != fmt.Sprint(want) {
		t.Errorf("peers_v2 through sidecar 1: %v; want %v", peers, want)
	}
	h, body := rc.do(t, cql.Query{Query: "SELECT rpc_address, broadcast_address FROM system.local", Params: cql.QueryParams{Consistency: cql.One}})
	if m, err := cql.DecodeResult(body, cql.V4); h.Opcode != cql.OpResult || err != nil {
		t.Fatalf("system.local: %v %v", h.Opcode, err)
	} else {
		row := m.(cql.RowsResult).Rows[0]
		rpc, _ := netip.AddrFromSlice(row[0])
		bcast, _ := netip.AddrFromSlice(row[1])
		if rpc != scs[0].Addr.Addr() || bcast != scs[0].Addr.Addr() {
			t.Errorf("system.local through sidecar 1: rpc_address %s, broadcast_address %s; want %s for both", rpc, bcast, scs[0].Addr.Addr())
		}
	}
	if h, _ := rc.do(t, cql.Register{Events: []string{cql.EventStatusChange}}); h.Opcode != cql.OpReady {
		t.Fatalf("REGISTER: got %v", h.Opcode)
	}

	w := newWatchPolicy()
	s := mustSession(t, scs[0], w)
	defer s.Close()
	setupSchema(t, s)
	if errs := ops(s, 0, 300); len(errs) > 0 {
		t.Fatalf("%d errors, first: %v", len(errs), errs[0])
	}
	hosts := w.snapshot()
	if len(hosts) != 3 {
		t.Errorf("gocql found %v; want the 3 sidecars", hosts)
	}
	for h := range hosts {
		if !sidecarSet(scs)[h] {
			t.Errorf("gocql found %s, not a sidecar", h)
		}
	}
	for i, n := range executes(scs) {
		if n == 0 {
			t.Errorf("sidecar %d got no EXECUTE", i+1)
		}
	}

	if err := c.Stop(1); err != nil {
		t.Fatal(err)
	}
	if ev := rc.nextEvent(t); ev.Change != "DOWN" || ev.Addr != scs[1].Addr {
		t.Errorf("got %s %s; want DOWN %s", ev.Change, ev.Addr, scs[1].Addr)
	}
	w.waitFor(t, scs[1].Addr, false)
	s.Close()
	requireNoBypass(t, c, scs, 1)
}

func TestParsePeerMap(t *testing.T) {
	tests := []struct {
		name, text, wantErr string
	}{
		{"lines", "10.0.0.1:9042 10.0.1.1:9043\n# comment\n\n10.0.0.2:9042=10.0.1.2:9043", ""},
		{"commas, IPs", "10.0.0.1=10.0.1.1, 10.0.0.2=10.0.1.2:9999", ""},
		{"empty", "# nothing\n", "no NODE=SIDECAR mapping"},
		{"one field", "10.0.0.1:9042", "want NODE=SIDECAR"},
		{"bad node", "node1=10.0.1.1:9043", `node address "node1"`},
		{"bad sidecar", "10.0.0.1:9042=sidecar1", `sidecar address "sidecar1"`},
		{"twice", "10.0.0.1:9042=10.0.1.1:9043\n10.0.0.1:9042=10.0.1.2:9043", "line 2: node 10.0.0.1:9042 is mapped twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := sidecar.ParsePeerMap(tt.text)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("got %v; want no error", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("got %v; want an error containing %q", err, tt.wantErr)
			case err == nil && m.Len() != 2:
				t.Errorf("got %d mappings; want 2", m.Len())
			}
		})
	}
}
