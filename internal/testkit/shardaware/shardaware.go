// Package shardaware is a shard-aware CQL client for tests, written from ScyllaDB's
// protocol extensions document ("Intranode sharding"): it reads the node's sharding from
// the SUPPORTED of a first connection, opens one connection per shard to the shard-aware
// port from a local port that the node maps to that shard (port % nr_shards), and sends
// each EXECUTE on the connection of the shard that owns its partition key's token. It
// stands in for ScyllaDB's drivers, which CI cannot fetch. A Client is not safe for
// concurrent use.
package shardaware

import (
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/sharding"
	"github.com/tracecar/tracecar/internal/testkit/rawcql"
)

// Client holds one connection per shard of one node.
type Client struct {
	// Info is the node's sharding, as the first connection's SUPPORTED gave it.
	Info sharding.Info
	// Conns are the connections by shard; Ports their local ports.
	Conns []*rawcql.Conn
	Ports []int
	// Sent counts the EXECUTEs sent on each shard's connection.
	Sent []int
	rk   []byte
	// ordinary: the connections were opened on the ordinary port, and requests go round
	// robin (next), as from a driver that is not shard-aware.
	ordinary bool
	next     int
}

// Config says how to reach the node. The zero value speaks plaintext protocol v4.
type Config struct {
	// TLS, when set, makes every connection TLS, and the shard-aware port the one in
	// SCYLLA_SHARD_AWARE_PORT_SSL.
	TLS *tls.Config
	// Version is the protocol version; zero means v4.
	Version byte
	// Ordinary, when set, makes the client one that is not shard-aware: it opens as many
	// connections on the ordinary port, and sends requests on them in turn.
	Ordinary bool
}

// Options sends OPTIONS and returns the SUPPORTED options.
func Options(c *rawcql.Conn) (map[string][]string, error) {
	h, body, err := c.Do(cql.Options{})
	if err != nil {
		return nil, err
	}
	if h.Opcode != cql.OpSupported {
		return nil, fmt.Errorf("OPTIONS: got %s", h.Opcode)
	}
	s, err := cql.DecodeSupported(body)
	return s.Options, err
}

// Dial connects to the node at addr (its ordinary port) as described in the package
// comment and fails tb unless every shard gets its connection, each of which says, in its
// own SUPPORTED, that it landed on the shard it was opened for.
func Dial(tb testing.TB, addr string, cfg Config) *Client {
	tb.Helper()
	if cfg.Version == 0 {
		cfg.Version = cql.V4
	}
	first := rawcql.NewConn(tb, mustDial(tb, cfg, addr, 0), cfg.Version)
	opts, err := Options(first)
	if err != nil {
		tb.Fatalf("first connection: %v", err)
	}
	info, err := sharding.Parse(opts)
	if err != nil {
		tb.Fatalf("first connection's SUPPORTED %v: %v", opts, err)
	}
	c := &Client{Info: info, Conns: make([]*rawcql.Conn, info.NrShards), Ports: make([]int, info.NrShards), Sent: make([]int, info.NrShards)}
	port := info.AwarePort
	if cfg.TLS != nil {
		port = info.AwarePortSSL
	}
	if port == 0 && !cfg.Ordinary {
		tb.Fatalf("SUPPORTED %v names no shard-aware port", opts)
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		tb.Fatal(err)
	}
	aware := netip.AddrPortFrom(ap.Addr(), uint16(port)).String()
	if cfg.Ordinary {
		c.dialOrdinary(tb, cfg, addr)
	} else {
		for shard := range info.NrShards {
			c.dialShard(tb, cfg, aware, shard)
		}
	}
	first.Startup(tb, "")
	first.Net().Close()
	return c
}

// dialShard opens shard's connection from a local port p with p % nr_shards == shard,
// trying the next such port when one is in use, at most 64 times.
func (c *Client) dialShard(tb testing.TB, cfg Config, aware string, shard int) {
	tb.Helper()
	n := c.Info.NrShards
	lo, hi := 49152, 65535
	p := lo + rand.IntN(hi-lo-n)
	p += (shard - p%n + n) % n
	for range 64 {
		nc, err := dialFrom(cfg, aware, p)
		if errors.Is(err, syscall.EADDRINUSE) || errors.Is(err, syscall.EADDRNOTAVAIL) {
			if p += n; p > hi {
				p = lo + (shard-lo%n+n)%n
			}
			continue
		}
		if err != nil {
			tb.Fatalf("dial %s from port %d: %v", aware, p, err)
		}
		c.open(tb, cfg, rawcql.NewConn(tb, nc, cfg.Version), shard, p)
		return
	}
	tb.Fatalf("no free local port for shard %d of %d", shard, n)
}

// dialOrdinary opens nr_shards connections on the ordinary port and takes the shard each
// lands on, as a driver without shard-awareness does.
func (c *Client) dialOrdinary(tb testing.TB, cfg Config, addr string) {
	tb.Helper()
	for i := range c.Info.NrShards {
		rc := rawcql.NewConn(tb, mustDial(tb, cfg, addr, 0), cfg.Version)
		if _, err := Options(rc); err != nil { // as drivers do
			tb.Fatal(err)
		}
		rc.Startup(tb, "")
		c.Conns[i] = rc
		c.Ports[i] = rc.Net().LocalAddr().(*net.TCPAddr).Port
	}
	c.ordinary = true
}

// open checks the shard the node gave rc and starts it.
func (c *Client) open(tb testing.TB, cfg Config, rc *rawcql.Conn, shard, port int) {
	tb.Helper()
	opts, err := Options(rc)
	if err != nil {
		tb.Fatalf("shard %d: %v", shard, err)
	}
	if got := opts[sharding.KeyShard]; len(got) != 1 || got[0] != strconv.Itoa(shard) {
		tb.Fatalf("connection from port %d: SCYLLA_SHARD %v; want %d", port, got, shard)
	}
	rc.Startup(tb, "")
	c.Conns[shard], c.Ports[shard] = rc, port
}

func mustDial(tb testing.TB, cfg Config, addr string, port int) net.Conn {
	tb.Helper()
	nc, err := dialFrom(cfg, addr, port)
	if err != nil {
		tb.Fatalf("dial %s: %v", addr, err)
	}
	return nc
}

// dialFrom connects to addr from local port port (0: any), over TLS with cfg.TLS.
func dialFrom(cfg Config, addr string, port int) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	if port != 0 {
		d.LocalAddr = &net.TCPAddr{Port: port}
	}
	nc, err := d.Dial("tcp", addr)
	if err != nil || cfg.TLS == nil {
		return nc, err
	}
	tc := tls.Client(nc, cfg.TLS)
	if err := tc.Handshake(); err != nil {
		nc.Close()
		return nil, err
	}
	return tc, nil
}

// Query runs q on shard 0's connection and fails tb on an error.
func (c *Client) Query(tb testing.TB, q string) cql.Message {
	tb.Helper()
	return c.Conns[0].Query(tb, q)
}

// Prepare prepares q on every connection (a driver prepares on each, as the node may
// forget) and returns the first PREPARED result.
func (c *Client) Prepare(tb testing.TB, q string) cql.PreparedResult {
	tb.Helper()
	var first cql.PreparedResult
	for i, rc := range c.Conns {
		res := rc.MustResult(tb, cql.Prepare{Query: q})
		pr, ok := res.(cql.PreparedResult)
		if !ok {
			tb.Fatalf("PREPARE %q: got %T", q, res)
		}
		if i == 0 {
			first = pr
		}
	}
	return first
}

// Shard returns the shard that owns the partition key of pr bound to values, or -1 when
// the PREPARED result names no partition key.
func (c *Client) Shard(pr cql.PreparedResult, values [][]byte) int {
	idx := pr.Metadata.PKIndexes
	if len(idx) == 0 {
		return -1
	}
	parts := make([][]byte, len(idx))
	for i, j := range idx {
		parts[i] = values[j]
	}
	key, ok := sharding.RoutingKey(c.rk[:0], parts...)
	c.rk = key
	if !ok {
		return -1
	}
	return c.Info.ShardOf(sharding.Token(key))
}

// Execute runs pr with values on the connection of the shard that owns its partition key
// (shard 0's when there is none; the next connection in turn with Config.Ordinary), and
// fails tb on an error. It returns the index of the connection used.
func (c *Client) Execute(tb testing.TB, pr cql.PreparedResult, values ...[]byte) int {
	tb.Helper()
	shard, err := c.TryExecute(pr, values...)
	if err != nil {
		tb.Fatalf("EXECUTE on shard %d: %v", shard, err)
	}
	return shard
}

// Close closes every connection.
func (c *Client) Close() {
	for _, rc := range c.Conns {
		if rc != nil {
			rc.Net().Close()
		}
	}
}

// TryExecute is Execute that returns an error rather than failing a test, for load run
// from another goroutine than the test's.
func (c *Client) TryExecute(pr cql.PreparedResult, values ...[]byte) (int, error) {
	shard := max(c.Shard(pr, values), 0)
	if c.ordinary {
		shard, c.next = c.next, (c.next+1)%len(c.Conns)
	}
	p := cql.QueryParams{Consistency: cql.One, Flags: cql.QueryValues}
	for _, v := range values {
		p.Values = append(p.Values, cql.Value{Bytes: v})
	}
	if _, err := c.Conns[shard].Result(cql.Execute{ID: pr.ID, ResultMetadataID: pr.ResultMetadataID, Params: p}); err != nil {
		return shard, err
	}
	c.Sent[shard]++
	return shard, nil
}
