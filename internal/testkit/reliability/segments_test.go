package reliability

import (
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/internal/testkit/rawcql"
	"github.com/tracecar/tracecar/sidecar"
	"github.com/tracecar/tracecar/tracing"
)

// heapPeak runs attack, whose connections stay open, and returns the peak of the heap in
// use during it and just after, above what it was before.
func heapPeak(t *testing.T, what string, attack func()) uint64 {
	t.Helper()
	mem := watchMemory()
	attack()
	time.Sleep(300 * time.Millisecond) // let the servers read what was sent
	mem.finish(t, what, heapBound)
	runtime.GC()
	if peak := mem.peakInuse.Load(); peak > mem.before.HeapInuse {
		return peak - mem.before.HeapInuse
	}
	return 0
}

// TestHostileSegmentClaims: 40 connections to the sidecar and 40 to the node, past a v5
// handshake, each claim the largest segment and send part of it; then as many each send
// the first segment of a frame claiming just under the 16 MiB limit, and stall. That costs
// no more memory than today's frame caps allow (four times the bytes received), as the
// same number of v4 connections, each claiming a legal 16 MiB frame and sending as many
// bytes, which the test measures too. Full tracing makes the sidecar read every frame
// whole, the worst case.
func TestHostileSegmentClaims(t *testing.T) {
	const conns, sent = 40, 96 << 10
	n := startNode(t, node.Config{})
	tr := tracing.New(tracing.Options{})
	t.Cleanup(func() { tr.Close(t.Context()) })
	tr.SetConfig(tracing.Config{Enable: true, ThresholdMicros: 0})
	sc := startSidecar(t, sidecar.Config{NodeAddr: n.addr}, tr)
	s := session(t, sc.addr)
	probe := startProber(s)
	targets := []string{sc.addr, n.addr}
	claim := uint32(cql.DefaultMaxFrameSize - cql.HeaderSize)
	chunk := make([]byte, sent)

	var held []net.Conn
	closeHeld := func() {
		// The next attack starts once the sidecar let this one's connections go.
		target := sc.Stats().Connections - len(held)/2
		for _, c := range held {
			c.Close()
		}
		held = held[:0]
		for deadline := time.Now().Add(testTimeout); sc.Stats().Connections > target && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
	}
	frames := heapPeak(t, "today: 80 v4 connections, each 96 KiB into a 16 MiB frame", func() {
		for _, addr := range targets {
			for range conns {
				c := dialReady(t, addr)
				held = append(held, c)
				c.Write(cql.AppendHeader(nil, cql.Header{Version: cql.V4, Stream: 1, Opcode: cql.OpQuery, Length: claim}))
				c.Write(chunk)
			}
		}
	})
	closeHeld()

	segments := heapPeak(t, "v5: 80 connections, each 96 KiB into the largest segment", func() {
		for _, addr := range targets {
			for range conns {
				c := rawcql.Dial(t, addr, cql.V5, "")
				held = append(held, c.Net())
				c.Write(cql.AppendSegmentHeader(nil, cql.SegmentHeader{Length: cql.MaxSegmentPayload, SelfContained: true}, false))
				c.Write(chunk)
			}
		}
	})
	closeHeld()

	large := heapPeak(t, "v5: 80 connections, each the first segment of a 16 MiB frame", func() {
		for _, addr := range targets {
			for range conns {
				c := rawcql.Dial(t, addr, cql.V5, "")
				held = append(held, c.Net())
				f := cql.AppendHeader(nil, cql.Header{Version: cql.V5, Stream: 1, Opcode: cql.OpQuery, Length: claim})
				f = append(f, chunk[:sent-cql.HeaderSize]...)
				c.Write(cql.AppendSegment(nil, f, false, false))
			}
		}
	})
	closeHeld()
	probe.finish(t)

	t.Logf("FIGURE hostile segments: peak heap growth %s for 80 v4 connections with 96 KiB of 16 MiB frames (today's caps); %s for 80 v5 connections with 96 KiB of the largest segment; %s for 80 with the first segment (96 KiB) of a 16 MiB frame",
		mib(frames), mib(segments), mib(large))
	// Today's cap: what a connection holds of a frame grows with the bytes it received, to
	// four times them at most (cql.AppendRead, the loop's gatherRoom), plus its fixed
	// buffers (16 KiB readers and writers, both sides).
	bound := 4*uint64(len(targets)*conns*sent) + uint64(len(targets)*conns)*64<<10
	for _, c := range []struct {
		what string
		got  uint64
	}{{"v4 frames", frames}, {"claimed segments", segments}, {"large frames' first segments", large}} {
		if c.got > bound {
			t.Errorf("%s: peak heap growth %s; want no more than today's frame caps allow, %s", c.what, mib(c.got), mib(bound))
		}
	}
}
