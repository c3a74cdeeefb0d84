package cql

import "sync/atomic"

// Work is a kind of work that this package does for a frame's readers, as CountWork
// reports it.
type Work uint8

// The kinds of Work.
const (
	// WorkDecompress is a frame body decompressed whole, by any Compressor of this
	// package, whoever asked for it. The bytes are the compressed body.
	WorkDecompress Work = iota + 1
	// WorkParse is a request's statement and parameters parsed (Request.Parse, which
	// Frame.Request calls at most once per frame). The bytes are the request's message.
	WorkParse
	// WorkResponse is a RESULT's or an ERROR's message read (Response.Parse, which
	// Frame.Response calls at most once per frame). The bytes are the frame's body as it
	// came, compressed or not, or with Parse the message.
	WorkResponse
	// WorkResult is a RESULT decoded whole (Frame.Result, at most once per frame). The
	// bytes are the frame's body as it came.
	WorkResult
)

var workCounter atomic.Pointer[func(Work, []byte)]

// CountWork makes f hear of every piece of Work done from now on, with the bytes it was
// done on, until the returned stop is called: for tests that show a frame is decompressed
// and parsed at most once, counted where the work is done, so that no reader escapes the
// count. f may be called from any goroutine. Without a counter, counting is one atomic
// load. Counters do not nest: the last one set hears everything until its stop.
func CountWork(f func(Work, []byte)) (stop func()) {
	workCounter.Store(&f)
	return func() { workCounter.CompareAndSwap(&f, nil) }
}

func countWork(w Work, b []byte) {
	if f := workCounter.Load(); f != nil {
		(*f)(w, b)
	}
}
