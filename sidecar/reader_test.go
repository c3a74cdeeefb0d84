package sidecar

import (
	"net"
	"testing"
)

// TestFrameReaderReadsWithoutAllocating: on a plain TCP socket, the goroutine path's reader
// waits for bytes through the poller and reads them into a pooled buffer, and gives the
// buffer back once it is consumed, with no allocation per read once the pool is warm.
func TestFrameReaderReadsWithoutAllocating(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	w, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	rc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	r := newFrameReader(rc, readBufferSize)
	msg := make([]byte, 64)
	one := func() {
		if _, err := w.Write(msg); err != nil {
			t.Fatal(err)
		}
		if b, err := r.Peek(len(msg)); err != nil || len(b) != len(msg) {
			t.Fatalf("Peek: %d bytes, %v", len(b), err)
		}
		r.Discard(len(msg))
		if r.buf != nil {
			t.Fatal("the reader holds a buffer with nothing unread")
		}
	}
	one()
	if n := testing.AllocsPerRun(200, one); n != 0 {
		t.Errorf("%v allocations per read; want 0", n)
	}
}
