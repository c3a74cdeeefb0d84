package sidecar

import (
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"
)

// An idle connection holds no read or write buffer: both transports take their buffers from
// the pools below when bytes arrive, and give them back once the connection's frames are all
// forwarded (an empty reader, a flushed writer, the event loop's output and partial frames
// gone), as HAProxy does. 2,000 idle connections then cost the sidecar about what they cost
// HAProxy (README, "Idle connections"); a connection that sends a frame pays a pool get and
// put per read and per flush, which allocate nothing once the pool is warm.

// The pools hold buffers of power-of-two sizes from minPooledBuffer to maxKeptBuffer, one
// pool per size. They store the buffer's first byte, not the slice, so that a Put does not
// allocate an interface box for a slice header.
const (
	minPooledBuffer = 1 << 10
	bufferClasses   = 11 // 1 KiB to maxKeptBuffer, 1 MiB
)

var bufferPools [bufferClasses]sync.Pool

// buffersInUse counts the pooled buffers taken and not given back, for the tests that
// check that idle connections hold none.
var buffersInUse atomic.Int64

// bufferClass returns the pool index and the size of the smallest class of at least n
// bytes, or -1 when n is over maxKeptBuffer.
func bufferClass(n int) (int, int) {
	if n > maxKeptBuffer {
		return -1, n
	}
	if n <= minPooledBuffer {
		return 0, minPooledBuffer
	}
	shift := bits.Len(uint(n - 1))
	return shift - bits.TrailingZeros(minPooledBuffer), 1 << shift
}

// getBuffer returns an empty buffer with room for at least n bytes.
func getBuffer(n int) []byte {
	i, size := bufferClass(n)
	if i < 0 {
		return make([]byte, 0, size) // too large to keep: the collector takes it back
	}
	buffersInUse.Add(1)
	if p, _ := bufferPools[i].Get().(*byte); p != nil {
		return unsafe.Slice(p, size)[:0]
	}
	return make([]byte, 0, size)
}

// putBuffer gives b back to its pool; nothing may use b afterwards. A nil buffer, or one that
// getBuffer did not return (its capacity is no class size), is dropped.
func putBuffer(b []byte) {
	if cap(b) == 0 {
		return
	}
	i, size := bufferClass(cap(b))
	if i < 0 || size != cap(b) {
		return
	}
	buffersInUse.Add(-1)
	bufferPools[i].Put(unsafe.SliceData(b[:1]))
}

// maxKeptBuffer is the largest scratch buffer kept between frames; a larger one, grown for
// a rare large frame, is released so that an idle connection stays small.
const maxKeptBuffer = 1 << 20
