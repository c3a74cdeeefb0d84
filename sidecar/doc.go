// Package sidecar is tracecar's CQL proxy. It sits in front of one node: every client
// connection gets a connection of its own to the node, and frames go through as bytes, with
// their stream ids, so that authentication, USE, REGISTER, prepared statements and
// compression stay the client's own.
//
// The proxy decodes only what it must. It reads the version of a connection's first frame
// (to answer versions other than 3 and 4 as Cassandra does), the COMPRESSION option of
// STARTUP, and the text of QUERY and PREPARE requests and the id of EXECUTE requests, to
// find the queries on system.local, system.peers and system.peers_v2. Only the responses to
// those, and TOPOLOGY_CHANGE and STATUS_CHANGE events, are decoded and re-encoded, with the
// node's addresses replaced by the sidecar's, so that drivers never route around it.
//
// # Data paths
//
// A connection starts on its own goroutine, which answers unsupported protocol versions and
// dials the node. Then a plaintext TCP connection moves to an event loop (loop.go): a
// goroutine locked to an OS thread, around a level-triggered epoll set of non-blocking
// sockets, one loop per two of GOMAXPROCS (TRACECAR_EVENT_LOOPS=n overrides). A loop waits
// in a raw epoll_wait and keeps its P, so GOMAXPROCS grows by one per loop; reads and
// writes are raw system calls too, as they never block. Every ready socket is read into the loop's one buffer, every whole
// frame in it gets the per-frame work below and is appended to one output buffer, and that
// goes out in one write; what the peer does not take waits for EPOLLOUT, and the socket
// that fed it is not read until it is gone (backpressure). A frame larger than the read
// buffer is gathered on its own, in a buffer that grows as its bytes arrive, and a client's
// is charged to Config.MaxRequestDataInFlight as on the goroutine path (limits.go); frame
// limits, SUPPORTED filtering and statement statistics are per-frame work, the same on both
// paths. Connections that are not plain TCP (TLS: crypto/tls needs
// a net.Conn), and every connection when Config.NoEventLoop is set, take the goroutine path
// instead: one goroutine per direction, reading frames from one side and writing them to
// the other, flushing only when no whole frame is left in its input buffer, so frames that
// arrive together leave in one syscall there too.
//
// # Per-request work
//
// Both paths do the same work on each frame, through conn.request and conn.response:
// request inspects a request (STARTUP compression; OPTIONS; the AUTH_RESPONSE username;
// QUERY, PREPARE and EXECUTE of system tables by table reference, with the EXECUTE probe of
// statement.go; the text of a PREPARE), hands it to statement statistics
// (Config.Statements) and to tracing (tracing.Conn.Begin: one atomic load when tracing is
// off), records it in the connection's stream table with the Tickets of both, and counts
// it; the caller takes the record by stream id, and response notes the end of the
// handshake, hands the response to statement statistics and tracing (End, with the
// record's Ticket), learns a prepared statement from a RESULT Prepared into the one
// prepared-statement registry (shared with tracing), filters SUPPORTED, rewrites system
// tables and events, and records the latency. The stream table entry (inflight) is the one
// per-request record: tracing keeps none of its own. After the write that carried a
// traced frame, the path tells tracing (conn.wrote: Sent for requests, Done for
// responses); the frame writers know nothing of tracing. Each request is counted once, in
// the connection's counters, which the metrics and the tracer read (Proxy.Stats). Neither
// request nor response allocates with tracing off or in fast mode below the threshold
// (TestRequestPathAllocs); BenchmarkRequestPath measures them per mode.
//
// # Ending a connection
//
// On the event loop a connection ends in one place, loop.close, run on the loop: client
// EOF or error, a write error to the client, a drained connection with nothing in flight,
// and the last frames written (a ProtocolError for a malformed client frame; a Server
// error for each request in flight when the node connection fails, or cannot be written)
// all lead there, and it closes both sockets and releases the connection's goroutine in
// serve. Proxy.drain and closeAll from other goroutines post a command to the loop.
//
// On the goroutine path a connection is a state machine, conn.state, that only moves
// forward, by compare-and-swap, so that the frame loops read it with one atomic load:
//
//	open → draining → ending → closed
//
// Any state may be skipped: a connection ends without draining, and closeAll goes straight
// to closed.
//
//   - draining (conn.drain): the client's read deadline is set in the past, so the request
//     goroutine forwards what its reader holds and stops; the connection ends with cause
//     "drained" when the last request in flight is answered, seen by whichever goroutine
//     comes last (the request goroutine when nothing is in flight as it stops; else the
//     response goroutine once it answers the last one).
//   - ending (conn.stop, from either goroutine): the first cause stands; it is a client EOF
//     or read error, a malformed client frame (with its ProtocolError), a failed node read
//     (node lost) or write, a client write error, or drained. stop closes the node socket,
//     which ends the response goroutine's read and stops forwarding, and sets the client's
//     read deadline in the past, which ends the request goroutine's; the client's write
//     deadline is set to errWriteTimeout, so that no last frame waits on a client that does
//     not read.
//   - closed (conn.close, the one close path, on the response goroutine once the request
//     goroutine has stopped, so the set of requests in flight is final): it writes after
//     what is queued for the client what the cause calls for (the ProtocolError for a
//     malformed frame; a Server error for each request in flight when the node was lost or
//     could not be written), then closes both sockets. closeAll skips to closed at once.
//
// The cause is a field written under conn.mu rather than a context: the goroutines block
// in reads, which a context cannot interrupt, and each wakes from its socket (closed, or a
// deadline in the past) anyway. conn.mu also serialises these steps with setting the node
// socket and with the move to a loop (toLoop), so that drain and closeAll either act on the
// goroutine path or post to the loop; the loop sets closed in loop.close, and reads
// draining.
package sidecar
