// Package rawcql is a CQL client of raw frames for tests: it speaks protocol v3, v4 and
// v5, with v5's segments once the handshake is done (lz4 or not), so that a test can send
// exactly the frames and segments it wants, well-formed or not, and read what comes back.
// A Conn is not safe for concurrent use.
package rawcql

import (
	"bufio"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/cql"
)

// Conn is one connection. Its zero value is not usable: call Dial.
type Conn struct {
	nc      net.Conn
	r       *bufio.Reader
	version byte
	comp    cql.Compressor     // frame bodies (v3, v4)
	seg     *cql.SegmentReader // v5, once the handshake is done
	lz4     bool               // v5 segments in the lz4 format
	frames  []byte             // whole frames of the last segment, not read yet
	stream  int16
}

// Dial connects to addr and sends STARTUP for the protocol version with the compression
// ("", "lz4" or "snappy"). It fails tb unless the answer is READY. With v5 the connection
// then reads and writes segments. Every read and write must finish within 10 s.
func Dial(tb testing.TB, addr string, version byte, compression string) *Conn {
	tb.Helper()
	c := DialOnly(tb, addr, version)
	c.Startup(tb, compression)
	return c
}

// DialOnly connects to addr, for the protocol version, and sends nothing.
func DialOnly(tb testing.TB, addr string, version byte) *Conn {
	tb.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	return NewConn(tb, nc, version)
}

// NewConn is DialOnly on a connection the caller made (from a chosen local port, or over
// TLS): every read and write must finish within 10 s, and nc is closed when the test ends.
func NewConn(tb testing.TB, nc net.Conn, version byte) *Conn {
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	tb.Cleanup(func() { nc.Close() })
	return &Conn{nc: nc, r: bufio.NewReaderSize(nc, 4<<10), version: version}
}

// Startup sends STARTUP with the compression ("", "lz4" or "snappy"), fails tb unless the
// answer is READY, and switches the connection as Started does.
func (c *Conn) Startup(tb testing.TB, compression string) {
	tb.Helper()
	opts := map[string]string{"CQL_VERSION": "3.0.0"}
	if compression != "" {
		opts["COMPRESSION"] = compression
	}
	h, body, err := c.Do(cql.Startup{Options: opts})
	if err != nil || h.Opcode != cql.OpReady {
		tb.Fatalf("STARTUP v%d %q: got %s %x, %v; want READY", c.version, compression, h.Opcode, body, err)
	}
	c.Started(compression)
}

// Started switches the connection as a driver does once its STARTUP is answered: frame
// compression for v3 and v4, segments for v5.
func (c *Conn) Started(compression string) {
	if c.version < cql.V5 {
		c.comp = cql.CompressorByName(compression)
		return
	}
	c.lz4 = compression == "lz4"
	c.seg = &cql.SegmentReader{LZ4: c.lz4}
}

// Net returns the connection's socket.
func (c *Conn) Net() net.Conn { return c.nc }

// Version returns the protocol version of the connection.
func (c *Conn) Version() byte { return c.version }

// Frame encodes m as a request frame of the connection's version on a new stream, with
// flags, its body compressed when the connection compresses frames.
func (c *Conn) Frame(m cql.Message, flags byte) []byte {
	c.stream++
	h := cql.Header{Version: c.version, Flags: flags, Stream: c.stream}
	f, err := cql.AppendFrameCompressed(nil, h, m, c.comp)
	if err != nil {
		panic(err)
	}
	return f
}

// Segments returns frames as the connection sends them: as they are before the v5
// handshake is done, else in segments.
func (c *Conn) Segments(frames []byte) []byte {
	if c.seg == nil {
		return frames
	}
	return cql.AppendSegments(nil, frames, c.lz4)
}

// Write writes b as it is.
func (c *Conn) Write(b []byte) error {
	_, err := c.nc.Write(b)
	return err
}

// Send writes frames, in segments once the v5 handshake is done.
func (c *Conn) Send(frames []byte) error { return c.Write(c.Segments(frames)) }

// Recv reads the next frame and returns its header and its body, decompressed.
func (c *Conn) Recv() (cql.Header, []byte, error) {
	var frame []byte
	if c.seg != nil {
		for len(c.frames) == 0 {
			if err := c.readSegment(); err != nil {
				return cql.Header{}, nil, err
			}
		}
		h, err := cql.ParseHeader(c.frames)
		n := cql.HeaderSize + int(h.Length)
		if err != nil || n > len(c.frames) {
			return h, nil, fmt.Errorf("a frame that does not fit its segment: %v", err)
		}
		frame, c.frames = c.frames[:n], c.frames[n:]
	} else {
		h, body, _, err := cql.ReadFrame(c.r, nil)
		if err != nil {
			return h, nil, err
		}
		frame = append(cql.AppendHeader(nil, h), body...)
	}
	h, _ := cql.ParseHeader(frame)
	body := frame[cql.HeaderSize:]
	if h.Flags&cql.FlagCompression != 0 && c.seg == nil {
		if c.comp == nil {
			return h, nil, fmt.Errorf("a compressed frame without compression")
		}
		var err error
		if body, err = c.comp.Decompress(nil, body); err != nil {
			return h, nil, err
		}
	}
	return h, body, nil
}

// readSegment reads one segment and keeps its frames.
func (c *Conn) readSegment() error {
	hb, err := c.r.Peek(c.seg.HeaderSize())
	if err != nil {
		return err
	}
	n, err := c.seg.Peek(hb)
	if err != nil {
		return err
	}
	b := make([]byte, n)
	if _, err := readFull(c.r, b); err != nil {
		return err
	}
	_, _, frames, err := c.seg.Next(b)
	if err != nil {
		return err
	}
	c.frames = append(c.frames[:0], frames...)
	return nil
}

func readFull(r *bufio.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := r.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Do sends m and returns the response on its stream (events in between are skipped), its
// body past the response prefix.
func (c *Conn) Do(m cql.Message) (cql.Header, []byte, error) {
	f := c.Frame(m, 0)
	stream := c.stream
	if err := c.Send(f); err != nil {
		return cql.Header{}, nil, err
	}
	for {
		h, body, err := c.Recv()
		if err != nil {
			return h, nil, err
		}
		if h.Stream != stream {
			continue
		}
		_, msg, err := cql.ParseResponsePrefix(h.Flags, body)
		return h, msg, err
	}
}

// Result sends m and decodes its response: an error frame is returned as a cql.Error.
func (c *Conn) Result(m cql.Message) (cql.Message, error) {
	h, body, err := c.Do(m)
	if err != nil {
		return nil, err
	}
	res, err := cql.DecodeBody(h.Opcode, h.ProtoVersion(), body)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", h.Opcode, err)
	}
	if e, ok := res.(cql.Error); ok {
		return nil, e
	}
	return res, nil
}

// MustResult is Result that fails tb on an error.
func (c *Conn) MustResult(tb testing.TB, m cql.Message) cql.Message {
	tb.Helper()
	res, err := c.Result(m)
	if err != nil {
		tb.Fatalf("%s: %v", m.Opcode(), err)
	}
	return res
}

// Query runs a statement at consistency ONE and fails tb on an error.
func (c *Conn) Query(tb testing.TB, q string) cql.Message {
	tb.Helper()
	return c.MustResult(tb, cql.Query{Query: q, Params: cql.QueryParams{Consistency: cql.One}})
}
