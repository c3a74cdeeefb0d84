package node

import (
	"bufio"
	"sync"

	"github.com/tracecar/tracecar/internal/cql"
)

// The writing side of a connection, and the sizes of its buffers: responses coalesced into
// one write per burst of requests, as frames (v3, v4, and v5 before its handshake ends) or
// as v5 segments.

// connBufferSize is the size of a connection's reader and writer. They are what an idle
// connection holds, so they are kept small; larger frames are read into a buffer that grows
// as they arrive, and larger responses are written through.
const connBufferSize = 16 << 10

// maxKeptBuffer is the largest read buffer a connection keeps between frames.
const maxKeptBuffer = 1 << 20

// writer coalesces responses: frames are appended to a buffer and written in one syscall
// once the reader has no more buffered input, or when an event is pushed.
type writer struct {
	mu  sync.Mutex
	w   *bufio.Writer
	err error
	// seg says that the frames go out as v5 segments (lz4 ones with lz4), pend holds the
	// frames of the segment being filled, sbuf the segments encoded.
	seg, lz4   bool
	pend, sbuf []byte
}

func (w *writer) write(b []byte, flush bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if w.seg {
		w.err = w.writeSegments(b, flush)
		return w.err
	}
	if _, err := w.w.Write(b); err != nil {
		w.err = err
		return err
	}
	if flush {
		w.err = w.w.Flush()
	}
	return w.err
}

func (w *writer) flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = w.w.Flush()
	}
	return w.err
}

// startSegments makes every later write go out as segments.
func (w *writer) startSegments(lz4 bool) {
	w.mu.Lock()
	w.seg, w.lz4 = true, lz4
	w.mu.Unlock()
}

// writeSegments queues frames as segments; w.mu is held. The frames of writes between two
// flushes share segments; a segment goes out once it is full.
func (w *writer) writeSegments(frames []byte, flush bool) error {
	w.pend = append(w.pend, frames...)
	if !flush && len(w.pend) < cql.MaxSegmentPayload {
		return nil
	}
	w.sbuf = cql.AppendSegments(w.sbuf[:0], w.pend, w.lz4)
	w.pend = w.pend[:0]
	if cap(w.pend) > maxKeptBuffer {
		w.pend = nil
	}
	if _, err := w.w.Write(w.sbuf); err != nil {
		return err
	}
	if cap(w.sbuf) > maxKeptBuffer {
		w.sbuf = nil
	}
	if flush {
		return w.w.Flush()
	}
	return nil
}
