package sidecar

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"syscall"

	"github.com/tracecar/tracecar/internal/cql"
)

// frameReader is the buffered reader of one side of a connection on the goroutine path (and
// of the version gate on both): bufio.Reader's Peek, Discard and Read, but its buffer comes
// from the pool when bytes arrive and goes back to it as soon as everything read is consumed,
// so that a connection blocked waiting for its peer holds no buffer. A frameReader is owned
// by one goroutine.
type frameReader struct {
	src  io.Reader
	raw  syscall.RawConn // src's socket when it is plain TCP: see waitFill
	size int             // the buffer size, what Size reports
	buf  []byte          // nil while empty
	r, w int             // buf[r:w] is unread
	err  error           // the error of the last read, returned once the buffer is consumed

	// readFD is rawRead as a func value, made once: a closure made per read would be an
	// allocation per read. rawN and rawErr are what its last call read.
	readFD func(fd uintptr) bool
	rawN   int
	rawErr error

	// idle, when set, says what to do when a read of src ends at a read deadline (see
	// park.go); between is set while the reader waits for the start of a frame (next).
	idle    func(between bool) idleAction
	between bool
	// parkNow has the next wait between frames park at once, without a read, when nothing
	// is buffered: set by a side once the handshake needs no more of it (park.go).
	parkNow bool
}

func newFrameReader(src io.Reader, size int) *frameReader {
	r := &frameReader{size: size}
	r.readFD = r.rawRead
	r.reset(src)
	return r
}

// reset reads from src from here on; what is buffered stays first.
func (r *frameReader) reset(src io.Reader) {
	r.src, r.raw = src, nil
	if tc, ok := src.(*net.TCPConn); ok {
		r.raw, _ = tc.SyscallConn()
	}
}

// Size returns the size of the buffer: a frame up to this size is read whole into it.
func (r *frameReader) Size() int { return r.size }

// Buffered returns the number of bytes that can be read without reading src.
func (r *frameReader) Buffered() int { return r.w - r.r }

// grow makes the buffer size, larger than now, what is buffered kept.
func (r *frameReader) grow(size int) {
	r.size = size
	if r.buf != nil && cap(r.buf) < size {
		r.moveTo(getBuffer(size))
	}
}

// preload puts b, read from src by someone else (an old process, in a handover), before
// what src holds.
func (r *frameReader) preload(b []byte) {
	if len(b) == 0 {
		return
	}
	if r.buf == nil || cap(r.buf)-r.Buffered() < len(b) {
		r.moveTo(getBuffer(max(r.size, r.Buffered()+len(b))))
	}
	r.slide()
	r.w += copy(r.buf[r.w:cap(r.buf)], b)
	r.size = max(r.size, r.w)
}

// moveTo copies what is buffered to nb, which becomes the buffer.
func (r *frameReader) moveTo(nb []byte) {
	n := copy(nb[:cap(nb)], r.buf[r.r:r.w])
	putBuffer(r.buf)
	r.buf, r.r, r.w = nb[:cap(nb)], 0, n
}

// slide moves the unread bytes to the start of the buffer.
func (r *frameReader) slide() {
	if r.r > 0 {
		copy(r.buf, r.buf[r.r:r.w])
		r.w -= r.r
		r.r = 0
	}
}

// release gives the buffer back once nothing in it is unread.
func (r *frameReader) release() {
	if r.r == r.w && r.buf != nil {
		putBuffer(r.buf)
		r.buf, r.r, r.w = nil, 0, 0
	}
}

// Peek returns the next n bytes without consuming them; they are valid until the next call.
// With fewer than n bytes it returns them with the read error (bufio.ErrBufferFull when n
// is over Size).
func (r *frameReader) Peek(n int) ([]byte, error) {
	if n > r.size {
		return r.buf[r.r:r.w], bufio.ErrBufferFull
	}
	for r.Buffered() < n && r.err == nil {
		r.fill()
	}
	if r.Buffered() < n {
		err := r.err
		if r.Buffered() == 0 {
			r.err = nil // reported once, as bufio does
		}
		return r.buf[r.r:r.w], err
	}
	return r.buf[r.r : r.r+n], nil
}

// next returns the header of the next frame, as Peek(cql.HeaderSize), waiting between
// frames: there, and only there, a side may park.
func (r *frameReader) next() ([]byte, error) {
	if r.parkNow && r.Buffered() == 0 {
		r.parkNow = false
		return nil, errParked
	}
	r.between = true
	hb, err := r.Peek(cql.HeaderSize)
	r.between = false
	return hb, err
}

// Discard skips the next n bytes, reading src for those not buffered yet.
func (r *frameReader) Discard(n int) (int, error) {
	done := 0
	for {
		k := min(n-done, r.Buffered())
		r.r += k
		done += k
		r.release()
		if done == n {
			return done, nil
		}
		if r.err != nil {
			err := r.err
			r.err = nil
			return done, err
		}
		r.fill()
	}
}

// Read reads into p: what is buffered, else straight from src.
func (r *frameReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if r.Buffered() == 0 {
		if r.err != nil {
			err := r.err
			r.err = nil
			return 0, err
		}
		for {
			n, err := r.src.Read(p) // a large frame streamed or read whole: no buffer needed
			if err == nil || r.idle == nil || !isTimeout(err) || r.idle(false) != idleRetry {
				return n, err
			}
		}
	}
	n := copy(p, r.buf[r.r:r.w])
	r.r += n
	r.release()
	return n, nil
}

// fill reads src once. With no buffer it waits for the first byte without one.
func (r *frameReader) fill() {
	if r.buf == nil {
		r.waitFill()
	} else {
		r.slide()
		n, err := r.src.Read(r.buf[r.w:])
		r.w += n
		if err != nil {
			r.err = err
		} else if n == 0 {
			r.err = io.ErrNoProgress
		}
	}
	if r.err != nil && r.idle != nil && isTimeout(r.err) {
		switch r.idle(r.between && r.buf == nil) {
		case idleRetry:
			r.err = nil // the callers read again
		case idlePark:
			r.err = errParked
		}
	}
}

// waitFill reads src into a new buffer, taken from the pool only once bytes are there. On a
// plain TCP socket it waits for readability through the runtime's poller and reads in the
// same call, the system calls of an ordinary read; on anything else (TLS, a handover's
// pending bytes) it waits in a one-byte read, which TLS serves from the record it decrypted.
func (r *frameReader) waitFill() {
	if r.raw != nil {
		r.rawFill()
		return
	}
	var one [1]byte
	n, err := r.src.Read(one[:])
	if n > 0 {
		r.buf, r.r, r.w = getBuffer(r.size), 0, 1
		r.buf = r.buf[:cap(r.buf)]
		r.buf[0] = one[0]
	}
	r.err = err
}

// rawFill is waitFill on a plain TCP socket.
func (r *frameReader) rawFill() {
	r.rawN, r.rawErr = 0, nil
	err := r.raw.Read(r.readFD)
	switch {
	case err != nil:
		r.err = err // a deadline, or the socket closed
	case r.rawErr != nil:
		r.err = &net.OpError{Op: "read", Net: "tcp", Err: r.rawErr}
	case r.rawN == 0:
		r.err = io.EOF
	}
}

// rawRead reads the socket fd into a pooled buffer, which it keeps only when bytes came;
// it returns false, to wait for the poller holding no buffer, when none are there yet.
func (r *frameReader) rawRead(fd uintptr) bool {
	buf := getBuffer(r.size)
	buf = buf[:cap(buf)]
	n, err := syscall.Read(int(fd), buf)
	if err == syscall.EAGAIN || err == syscall.EINTR {
		putBuffer(buf)
		return false
	}
	r.rawN, r.rawErr = max(n, 0), err
	if n > 0 {
		r.buf, r.r, r.w = buf, 0, n
	} else {
		putBuffer(buf)
	}
	return true
}

// errParked ends a side's frame loop when its goroutine is to park (frameReader.idle).
var errParked = errors.New("parked")

// idleAction is what a frameReader does when a read of its socket ends at a deadline.
type idleAction uint8

const (
	idleFail  idleAction = iota // the deadline's error stands (drain, stop)
	idleRetry                   // read on: the deadline was the parker's, and is cleared
	idlePark                    // return errParked: the side parks
)

// isTimeout reports whether err is a read that ended at its deadline.
func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }
