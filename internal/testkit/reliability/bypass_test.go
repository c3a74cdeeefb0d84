package reliability

import (
	"bufio"
	"net/netip"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/sidecar"
)

// TestOptionsThroughSidecarHasNoShardAwarePort is the acceptance case: through the sidecar,
// OPTIONS to a node started with --scylla-supported gets a SUPPORTED without the
// shard-aware ports, and with the other SCYLLA_* keys.
func TestOptionsThroughSidecarHasNoShardAwarePort(t *testing.T) {
	n := startNode(t, node.Config{ScyllaSupported: true})
	sc := startSidecar(t, sidecar.Config{NodeAddr: n.addr}, nil)
	for _, target := range []struct {
		name, addr string
		wantPort   bool
	}{{"node", n.addr, true}, {"sidecar", sc.addr, false}} {
		c := dialReady(t, target.addr)
		c.SetDeadline(time.Now().Add(testTimeout))
		c.Write(cql.AppendFrame(nil, cql.Header{Version: cql.V4, Stream: 9}, cql.Options{}))
		h, body, _, err := cql.ReadFrame(bufio.NewReader(c), nil)
		c.Close()
		if err != nil || h.Opcode != cql.OpSupported {
			t.Fatalf("%s: OPTIONS got %s, %v; want SUPPORTED", target.name, h.Opcode, err)
		}
		m, err := cql.DecodeSupported(body)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("SUPPORTED from the %s: %v", target.name, m.Options)
		for _, k := range []string{"SCYLLA_SHARD_AWARE_PORT", "SCYLLA_SHARD_AWARE_PORT_SSL"} {
			if _, ok := m.Options[k]; ok != target.wantPort {
				t.Errorf("%s: SUPPORTED has %s: %v, want %v", target.name, k, ok, target.wantPort)
			}
		}
		for _, k := range []string{"SCYLLA_SHARD", "SCYLLA_NR_SHARDS", "SCYLLA_PARTITIONER", "SCYLLA_SHARDING_ALGORITHM", "SCYLLA_SHARDING_IGNORE_MSB"} {
			if _, ok := m.Options[k]; !ok {
				t.Errorf("%s: SUPPORTED lacks %s", target.name, k)
			}
		}
	}
}

// downRecorder is a host selection policy that reports the hosts gocql marks down.
type downRecorder struct {
	gocql.HostSelectionPolicy
	down chan string
}

func (d *downRecorder) HostDown(h *gocql.HostInfo) {
	select {
	case d.down <- h.ConnectAddress().String():
	default:
	}
	d.HostSelectionPolicy.HostDown(h)
}

// TestDriverActsOnEventsThroughSidecar: the node (on 127.0.0.2) sends STATUS_CHANGE DOWN
// about itself; through the sidecar (on 127.0.0.1) gocql matches the event to the host it
// knows, by the broadcast_address the sidecar wrote into system.local, and marks it down.
func TestDriverActsOnEventsThroughSidecar(t *testing.T) {
	n := startNodeOn(t, node.Config{}, "127.0.0.2:0")
	sc := startSidecar(t, sidecar.Config{NodeAddr: n.addr}, nil)
	rec := &downRecorder{HostSelectionPolicy: gocql.RoundRobinHostPolicy(), down: make(chan string, 16)}
	s := sessionWith(t, sc.addr, func(c *gocql.ClusterConfig) {
		c.PoolConfig.HostSelectionPolicy = rec
		c.ReconnectInterval = time.Hour // the host stays down once marked
	})
	var b string
	if err := s.Query("SELECT broadcast_address FROM system.local").Scan(&b); err != nil {
		t.Fatal(err)
	}
	if want := "127.0.0.1"; b != want {
		t.Errorf("broadcast_address through the sidecar = %s, want %s (the sidecar's)", b, want)
	}
	// The control connection has registered for events once the session is up; the event
	// is sent again until gocql acts on it, in case registration was still in flight, but
	// no oftener than gocql's debouncer (1 s) lets events through.
	ev := cql.Event{Type: cql.EventStatusChange, Change: "DOWN", Addr: netip.MustParseAddrPort(n.addr)}
	deadline := time.After(testTimeout)
	tick := time.NewTicker(3 * time.Second)
	defer tick.Stop()
	for {
		n.srv.BroadcastEvent(ev)
		select {
		case got := <-rec.down:
			if got != "127.0.0.1" {
				t.Errorf("gocql marked %s down, want 127.0.0.1 (the sidecar)", got)
			}
			t.Logf("gocql marked %s down on the node's STATUS_CHANGE DOWN about %s", got, n.addr)
			return
		case <-tick.C:
		case <-deadline:
			t.Fatalf("gocql did not act on STATUS_CHANGE DOWN within %v: the event does not match the host it knows", testTimeout)
		}
	}
}

// TestSystemTablesFromTableReference: through the sidecar (127.0.0.1) to a node on
// 127.0.0.2, a SELECT FROM local after USE system is rewritten, and a user's table whose
// query mentions 'system.local' in a string literal is not.
func TestSystemTablesFromTableReference(t *testing.T) {
	n := startNodeOn(t, node.Config{}, "127.0.0.2:0")
	sc := startSidecar(t, sidecar.Config{NodeAddr: n.addr}, nil)
	s := session(t, sc.addr)
	mustExec(t, s, "CREATE KEYSPACE IF NOT EXISTS rel WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
	mustExec(t, s, "CREATE TABLE IF NOT EXISTS rel.addrs (k text PRIMARY KEY, rpc_address inet)")
	mustExec(t, s, "INSERT INTO rel.addrs (k, rpc_address) VALUES ('system.local', '10.1.2.3')")
	var got string
	if err := s.Query("SELECT rpc_address FROM rel.addrs WHERE k = 'system.local'").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != "10.1.2.3" {
		t.Errorf("user table read with 'system.local' in a literal: rpc_address %s, want 10.1.2.3 (not rewritten)", got)
	}
	sys := sessionWith(t, sc.addr, func(c *gocql.ClusterConfig) { c.Keyspace = "system" })
	for _, q := range []string{"SELECT rpc_address FROM local", "SELECT rpc_address FROM system.local"} {
		if err := sys.Query(q).Scan(&got); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if got != "127.0.0.1" {
			t.Errorf("after USE system, %s: rpc_address %s, want 127.0.0.1 (the sidecar's)", q, got)
		}
	}
}

// TestPreparedSystemStatementAfterSidecarRestart: a statement on system.local prepared
// through one sidecar is executed, with skip_metadata as drivers do, through a new sidecar
// that never saw the PREPARE (a restarted one). Its rows are rewritten all the same, and a
// statement on a user table is left alone.
func TestPreparedSystemStatementAfterSidecarRestart(t *testing.T) {
	n := startNodeOn(t, node.Config{}, "127.0.0.2:0")
	s := session(t, n.addr)
	mustExec(t, s, "CREATE KEYSPACE IF NOT EXISTS rel WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
	mustExec(t, s, "CREATE TABLE IF NOT EXISTS rel.addrs (k text PRIMARY KEY, rpc_address inet)")
	mustExec(t, s, "INSERT INTO rel.addrs (k, rpc_address) VALUES ('local', '10.1.2.3')")

	first := startSidecar(t, sidecar.Config{NodeAddr: n.addr}, nil)
	prepare := func(addr, q string) []byte {
		c := dialReady(t, addr)
		defer c.Close()
		c.SetDeadline(time.Now().Add(testTimeout))
		c.Write(cql.AppendFrame(nil, cql.Header{Version: cql.V4, Stream: 1}, cql.Prepare{Query: q}))
		_, body, _, err := cql.ReadFrame(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		m, err := cql.DecodeResult(body, cql.V4)
		p, ok := m.(cql.PreparedResult)
		if err != nil || !ok {
			t.Fatalf("PREPARE %s: %T %v", q, m, err)
		}
		return p.ID
	}
	sysID := prepare(first.addr, "SELECT rpc_address FROM system.local WHERE key = ?")
	userID := prepare(first.addr, "SELECT rpc_address FROM rel.addrs WHERE k = ?")

	restarted := startSidecar(t, sidecar.Config{NodeAddr: n.addr}, nil)
	c := dialReady(t, restarted.addr)
	defer c.Close()
	c.SetDeadline(time.Now().Add(testTimeout))
	r := bufio.NewReader(c)
	execute := func(id []byte) string {
		t.Helper()
		params := cql.QueryParams{Consistency: cql.One, Flags: cql.QueryValues | cql.QuerySkipMetadata, Values: []cql.Value{{Bytes: []byte("local")}}}
		c.Write(cql.AppendFrame(nil, cql.Header{Version: cql.V4, Stream: 2}, cql.Execute{ID: id, Params: params}))
		_, body, _, err := cql.ReadFrame(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		m, err := cql.DecodeResult(body, cql.V4)
		rows, ok := m.(cql.RowsResult)
		if err != nil || !ok || len(rows.Rows) != 1 {
			t.Fatalf("EXECUTE: %T %+v %v", m, m, err)
		}
		a, _ := netip.AddrFromSlice(rows.Rows[0][0])
		return a.String()
	}
	for i := range 2 { // the first EXECUTE probes, the second uses what it learnt
		if got := execute(sysID); got != "127.0.0.1" {
			t.Errorf("EXECUTE %d of the system.local statement: rpc_address %s, want 127.0.0.1 (the sidecar's)", i+1, got)
		}
		if got := execute(userID); got != "10.1.2.3" {
			t.Errorf("EXECUTE %d of the user statement: rpc_address %s, want 10.1.2.3 (untouched)", i+1, got)
		}
	}
}
