package ctl

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"

	"github.com/tracecar/tracecar/internal/cql"
)

// discoverHosts returns the admin API addresses of a cluster's sidecars, found by reading
// system.local and system.peers_v2 (or system.peers) through the sidecar at cqlAddr: each
// sidecar's API is taken to be on the sidecar's IP at adminPort. The sidecars rewrite those
// tables, so they name the sidecars, not the nodes.
func discoverHosts(ctx context.Context, cqlAddr, adminPort string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", cqlAddr)
	if err != nil {
		return nil, fmt.Errorf("--hosts-from-cql: %w", err)
	}
	defer nc.Close()
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	c := &cqlConn{nc: nc, br: bufio.NewReader(nc)}
	fail := func(err error) ([]string, error) {
		return nil, fmt.Errorf("--hosts-from-cql %s: %w", cqlAddr, err)
	}
	switch m, err := c.do(cql.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0"}}); {
	case err != nil:
		return fail(err)
	case m == nil:
	default:
		return fail(fmt.Errorf("STARTUP answered %s: a cluster with authentication is not supported here; give --hosts", m.Opcode()))
	}
	local, err := c.addrs("SELECT rpc_address, rpc_port FROM system.local WHERE key = 'local'")
	if err != nil {
		return fail(err)
	}
	peers, err := c.addrs("SELECT native_address, native_port FROM system.peers_v2")
	if err != nil {
		if peers, err = c.addrs("SELECT rpc_address FROM system.peers"); err != nil {
			return fail(err)
		}
	}
	var out []string
	seen := map[netip.Addr]bool{}
	for _, a := range append(local, peers...) {
		if seen[a.Addr()] {
			continue
		}
		seen[a.Addr()] = true
		out = append(out, "http://"+net.JoinHostPort(a.Addr().String(), adminPort))
	}
	if len(out) == 0 {
		return fail(fmt.Errorf("system.local named no address"))
	}
	return out, nil
}

// cqlConn is the least of a CQL client: one request at a time, protocol v4, no compression.
type cqlConn struct {
	nc     net.Conn
	br     *bufio.Reader
	stream int16
}

// do sends m and returns the response: nil for READY, an error for an ERROR.
func (c *cqlConn) do(m cql.Message) (cql.Message, error) {
	c.stream++
	if _, err := c.nc.Write(cql.AppendFrame(nil, cql.Header{Version: cql.V4, Stream: c.stream, Opcode: m.Opcode()}, m)); err != nil {
		return nil, err
	}
	for {
		h, body, _, err := cql.ReadFrame(c.br, nil)
		if err != nil {
			return nil, err
		}
		if h.Stream != c.stream {
			continue // an event
		}
		if h.Opcode == cql.OpReady {
			return nil, nil
		}
		resp, err := cql.DecodeBody(h.Opcode, cql.V4, body)
		if err != nil {
			return nil, err
		}
		if e, ok := resp.(cql.Error); ok {
			return nil, fmt.Errorf("%s", e.Message)
		}
		return resp, nil
	}
}

// addrs runs a query whose rows are an inet and, optionally, an int port.
func (c *cqlConn) addrs(query string) ([]netip.AddrPort, error) {
	m, err := c.do(cql.Query{Query: query, Params: cql.QueryParams{Consistency: cql.One}})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", query, err)
	}
	rows, ok := m.(cql.RowsResult)
	if !ok {
		return nil, fmt.Errorf("%s: got %T, want rows", query, m)
	}
	var out []netip.AddrPort
	for _, r := range rows.Rows {
		a, ok := netip.AddrFromSlice(r[0])
		if !ok {
			continue
		}
		var port uint16
		if len(r) > 1 && len(r[1]) == 4 {
			port = uint16(r[1][2])<<8 | uint16(r[1][3])
		}
		out = append(out, netip.AddrPortFrom(a.Unmap(), port))
	}
	return out, nil
}
