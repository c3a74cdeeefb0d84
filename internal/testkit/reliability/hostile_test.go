package reliability

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/sidecar"
	"github.com/tracecar/tracecar/tracing"
)

// claimFrames sends a header claiming a body of claim bytes, then up to sent bytes of it,
// and returns the error the server answered with (nil if none) and the bytes it took.
func claimFrames(addr string, handshake bool, stream int16, claim uint32, sent int) (cql.Error, int, error) {
	c, err := net.DialTimeout("tcp", addr, testTimeout)
	if err != nil {
		return cql.Error{}, 0, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(testTimeout))
	r := bufio.NewReader(c)
	if handshake {
		c.Write(startupFrame(0))
		if h, _, _, err := cql.ReadFrame(r, nil); err != nil || h.Opcode != cql.OpReady {
			return cql.Error{}, 0, errors.New("no READY")
		}
	}
	if _, err := c.Write(cql.AppendHeader(nil, cql.Header{Version: cql.V4, Stream: stream, Opcode: cql.OpQuery, Length: claim})); err != nil {
		return cql.Error{}, 0, err
	}
	chunk := make([]byte, 64<<10)
	took := 0
	for took < sent {
		n, err := c.Write(chunk)
		took += n
		if err != nil {
			break // the server closed the connection, as it should
		}
	}
	h, body, _, err := cql.ReadFrame(r, nil)
	if err != nil {
		return cql.Error{}, took, err
	}
	e, err := cql.DecodeError(body)
	if h.Opcode != cql.OpError || h.Stream != stream {
		return e, took, errors.New("answer is not an ERROR on the claimed stream")
	}
	if _, err := r.ReadByte(); err != io.EOF && !errors.Is(err, net.ErrClosed) && !isReset(err) {
		return e, took, errors.New("connection still open after the ProtocolError")
	}
	return e, took, err
}

func isReset(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne)
}

// TestHostileFrameClaims is the acceptance case: 40 connections to the sidecar and 40 to
// the node claim 200 MiB frames (half before STARTUP, half after READY) and send 8 MiB of
// them. Each gets Cassandra's ProtocolError on its stream and is closed; the heap of the
// sidecar and node together stays under 256 MiB; a driver's requests keep succeeding.
func TestHostileFrameClaims(t *testing.T) {
	const conns, claim, sent = 40, 200 << 20, 8 << 20
	n := startNode(t, node.Config{})
	tr := tracing.New(tracing.Options{})
	t.Cleanup(func() { tr.Close(t.Context()) })
	tr.SetConfig(tracing.Config{Enable: true, ThresholdMicros: 0}) // full mode: the proxy reads every frame whole
	sc := startSidecar(t, sidecar.Config{NodeAddr: n.addr}, tr)
	s := session(t, sc.addr)

	probe := startProber(s)
	mem := watchMemory()
	var refused, wrong atomic.Int64
	var took atomic.Int64
	var firstWrong atomic.Pointer[string]
	for _, target := range []struct{ name, addr string }{{"sidecar", sc.addr}, {"node", n.addr}} {
		parallel(conns, func(i int) {
			handshake := i%2 == 1
			limit := cql.DefaultMaxFrameSize
			if !handshake {
				limit = cql.MaxStartupFrameSize
			}
			e, nb, err := claimFrames(target.addr, handshake, int16(100+i), claim, sent)
			took.Add(int64(nb))
			if err != nil || e.Code != cql.ErrCodeProtocol || e.Message != cql.FrameTooBigMessage(claim, limit) {
				wrong.Add(1)
				msg := target.name + ": " + e.Message
				if err != nil {
					msg += " (" + err.Error() + ")"
				}
				firstWrong.CompareAndSwap(nil, &msg)
				return
			}
			refused.Add(1)
		})
	}
	mem.finish(t, "80 connections claiming 200 MiB frames", heapBound)
	probe.finish(t)
	if w := firstWrong.Load(); w != nil {
		t.Errorf("%d of %d hostile connections were not refused with Cassandra's error, first: %s", wrong.Load(), 2*conns, *w)
	}
	t.Logf("FIGURE hostile frames: %d connections (sidecar and node) claimed 200 MiB, %d refused with the ProtocolError; the attackers wrote %s in all before being cut off; sidecar TooBig=%d; driver requests during the attack: %d ok, %d failed",
		2*conns, refused.Load(), mib(uint64(took.Load())), sc.Stats().TooBig, probe.ok.Load(), probe.failed.Load())
	if got := sc.Stats().TooBig; got != conns {
		t.Errorf("sidecar Stats().TooBig = %d, want %d", got, conns)
	}
	// Both keep serving a driver afterwards, through the sidecar and directly.
	for _, addr := range []string{sc.addr, n.addr} {
		var v string
		if err := session(t, addr).Query("SELECT release_version FROM system.local").Scan(&v); err != nil {
			t.Errorf("driver to %s after the attack: %v", addr, err)
		}
	}
}

// TestSlowFramesUnderTheLimit: 40 connections, past the handshake, each claim a frame just
// under the 16 MiB limit and send 8 MiB of it, then stall. Such frames are legal, so the
// bound is the proxy-wide budget of frames held whole (MaxRequestDataInFlight, 32 MiB
// here): the connections beyond it wait unread. Full tracing makes the sidecar hold every
// large frame whole, the worst case.
func TestSlowFramesUnderTheLimit(t *testing.T) {
	const conns, sent, budget = 40, 8 << 20, 32 << 20
	claim := uint32(cql.DefaultMaxFrameSize - cql.HeaderSize)
	n := startNode(t, node.Config{})
	tr := tracing.New(tracing.Options{})
	t.Cleanup(func() { tr.Close(t.Context()) })
	tr.SetConfig(tracing.Config{Enable: true, ThresholdMicros: 0})
	sc := startSidecar(t, sidecar.Config{NodeAddr: n.addr, MaxRequestDataInFlight: budget}, tr)
	s := session(t, sc.addr)
	probe := startProber(s)
	mem := watchMemory()
	held := make([]net.Conn, conns)
	var wrote atomic.Int64
	parallel(conns, func(i int) {
		c := dialReady(t, sc.addr)
		held[i] = c
		c.SetWriteDeadline(time.Now().Add(3 * time.Second))
		c.Write(cql.AppendHeader(nil, cql.Header{Version: cql.V4, Stream: 1, Opcode: cql.OpQuery, Length: claim}))
		chunk := make([]byte, 64<<10)
		for sentNow := 0; sentNow < sent; sentNow += len(chunk) {
			if _, err := c.Write(chunk); err != nil {
				return // not read: the budget is full
			}
			wrote.Add(int64(len(chunk)))
		}
	})
	time.Sleep(500 * time.Millisecond)
	// The stalled frames hold 32 MiB of budget; the bound allows for the buffers' growth
	// (up to twice what they hold) and the garbage of earlier growth.
	mem.finish(t, "40 connections sending 8 MiB of 16 MiB frames", 4*budget+32<<20)
	probe.finish(t)
	t.Logf("FIGURE slow frames under the limit: %d connections wrote %s in all toward the sidecar (the kernel buffers what the sidecar does not read); budget %s",
		conns, mib(uint64(wrote.Load())), mib(budget))
	for _, c := range held {
		if c != nil {
			c.Close()
		}
	}
}
