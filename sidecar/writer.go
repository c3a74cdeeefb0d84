package sidecar

import (
	"encoding/binary"
	"io"

	"github.com/tracecar/tracecar/internal/cql"
)

// frameWriter coalesces the frames going one way: the goroutine that reads from one side
// appends the frames it forwards, and flushes only when its input has no complete frame
// left, so that frames that arrive together leave in one syscall (CASSANDRA-5422). Its
// buffer is fixed, so a writer that cannot keep up blocks the reader that feeds it, which
// is the backpressure a slow peer needs. The buffer comes from the pool with the first frame
// and goes back after each flush, so that an idle connection holds none (buffers.go). A
// frameWriter is owned by one goroutine, and knows nothing of what it carries: its owner
// tells tracing after a flush (conn.wrote).
type frameWriter struct {
	w    io.Writer
	size int    // the buffer size; it never grows
	buf  []byte // pending bytes, nil when none
	err  error  // first write error; every later call returns it
}

func newFrameWriter(w io.Writer, size int) *frameWriter {
	return &frameWriter{w: w, size: size}
}

// grow makes the buffer size, larger than now, for the frames queued from here on.
func (fw *frameWriter) grow(size int) {
	fw.size = max(fw.size, size)
	if len(fw.buf) > 0 && cap(fw.buf) < fw.size {
		nb := append(getBuffer(fw.size), fw.buf...)
		putBuffer(fw.buf)
		fw.buf = nb
	}
}

// write queues frame, flushing first when it does not fit. A frame larger than the buffer
// is written directly.
func (fw *frameWriter) write(frame []byte) error {
	if fw.err != nil {
		return fw.err
	}
	if len(fw.buf)+len(frame) > fw.size {
		if err := fw.flush(); err != nil {
			return err
		}
		if len(frame) > fw.size {
			if _, err := fw.w.Write(frame); err != nil {
				fw.err = err
				return err
			}
			return nil
		}
	}
	if fw.buf == nil {
		fw.buf = getBuffer(fw.size)
	}
	fw.buf = append(fw.buf, frame...)
	return nil
}

// copyFrame forwards a frame of n bytes that starts at the head of r without holding it
// whole: its parts go straight from r's buffer to the writer. The pending frames are
// flushed first, so that the order of frames is kept.
func (fw *frameWriter) copyFrame(r *frameReader, n int) error {
	if err := fw.flush(); err != nil {
		return err
	}
	for n > 0 {
		if r.Buffered() == 0 {
			if _, err := r.Peek(1); err != nil {
				return noEOF(err)
			}
		}
		p, _ := r.Peek(min(r.Buffered(), n))
		if _, err := fw.w.Write(p); err != nil {
			fw.err = err
			return err
		}
		r.Discard(len(p))
		n -= len(p)
	}
	return nil
}

// flush writes the pending frames in one write.
func (fw *frameWriter) flush() error {
	if fw.err != nil {
		return fw.err
	}
	if len(fw.buf) == 0 {
		return nil
	}
	_, err := fw.w.Write(fw.buf)
	putBuffer(fw.buf) // everything queued is out, or never will be
	fw.buf = nil
	if err != nil {
		fw.err = err
		return err
	}
	return nil
}

// frameReady reports whether r holds a whole v3/v4 frame, so that reading it will not block.
// The owner of a frameWriter flushes when it does not.
func frameReady(r *frameReader) bool {
	n := r.Buffered()
	if n < cql.HeaderSize {
		return false
	}
	h, _ := r.Peek(cql.HeaderSize)
	return uint64(n) >= frameSize(h)
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// frameSize returns the size, header included, that the v3/v4 header at the start of hb
// claims for its frame, before the header is checked: the one reader of the length field
// beside cql.ParseHeader, for the tests of whether a whole frame is buffered.
func frameSize(hb []byte) uint64 {
	return cql.HeaderSize + uint64(binary.BigEndian.Uint32(hb[5:9]))
}
