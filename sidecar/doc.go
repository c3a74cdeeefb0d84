// Package sidecar is tracecar's CQL proxy. It sits in front of one node: every client
// connection gets a connection of its own to the node, and frames go through as bytes, with
// their stream ids, so that authentication, USE, REGISTER, prepared statements and
// compression stay the client's own.
//
// The proxy decodes only what it must. It reads the version of a connection's first frame
// (to answer versions other than 3, 4 and 5 as Cassandra does; Config.MaxProtocolVersion
// lowers the highest, for nodes without v5), the COMPRESSION option of
// STARTUP, and the text of QUERY and PREPARE requests and the id of EXECUTE requests, to
// find the queries on system.local, system.peers and system.peers_v2. Only the responses to
// those, and TOPOLOGY_CHANGE and STATUS_CHANGE events, are decoded and re-encoded, with the
// node's addresses replaced by the sidecar's, so that drivers never route around it.
//
// # Layers
//
// The files of the package are layers: a file uses declarations of the files below it,
// never of one above it (ci.TestSidecarFilesPointDown fails on a cycle, and prints it).
// From the ground up: the ground, the connection's core, the transports (the goroutine
// path, then the event loop), the proxy.
//
//	buffers.go              the pool of buffers
//	config.go               Config, and its check
//	lifecycle.go            a connection's state (open → draining → ending → closed), the first cause
//	limits.go               the budget of frames held whole, the counters of refusals
//	reader.go, writer.go    a side's buffered frame reader and writer, the idle actions
//
//	conn.go                 the connection's core: sockets, pipeline.Conn, lifecycle, v5's state,
//	                        connEnv (what it uses of its Proxy), carrier (its transport, on its end)
//	transport.go            what both transports do with a frame's header; the errors to a client
//	shutdown.go             a connection's end on either transport: drain, closeAll, the last frames
//	segments.go             v5's segments, the layer of both transports between bytes and frames
//
//	goroutines.go           the goroutine path: its state and its per-frame work, stop and close
//	park.go                 its parking of an idle connection
//	segments_goroutines.go  its segment loops
//	goroutines_run.go       its goroutines and frame loops, started and unparked
//	loopconn.go             the event loop's types: the loop, its commands, loopConn and its sides
//	move_linux.go           the loop's part in a handover; a connection as package handover sees it
//	loop_end.go             a connection's end on its loop: end, drain, close, expire
//	segments_loop.go        the loop's segments
//	loopio.go               the loop's reads, frames and writes, with backpressure
//	loop.go                 the loops: their goroutine, commands, a connection taken (toLoop)
//
//	tls.go                  the TLS of a client and of the node
//	shards.go               the shard-awareness state and the reasons of a fallback
//	registry.go             the Proxy type, its live connections and Stats
//	queries.go              the queries in flight (Proxy.Queries)
//	shards_node.go          the node's sharding asked and cached, ShardStats, the shard-aware port
//	shards_dial.go          a shard-aware connection's node dial
//	serve.go                a connection's start: newConn, the version gate and dial, the transport
//	proxy.go                New, Serve (accept), drain, the shard-aware Serve
//	handover.go             the handover's exported names, adopting a connection
//	handover_linux.go       the Proxy's part in a handover (Handoff, Adopt)
//
// listener.go (a pausable listener) stands apart. The connection's core reaches its
// transport only through its carrier (the event loop's loopConn, or the goroutine path's
// parking, parkState), and only on its end and for a v5 frame larger than a segment, never
// per frame; the transports reach their Proxy only through connEnv, which the Proxy
// holds (Proxy.env) and sets up.
//
// # Transports
//
// The proxy is two layers. A transport moves bytes: it reads sockets, finds the frames in
// what it read, writes them to the other side with backpressure, and ends the connection
// through the one state machine below (the connection's lifecycle). The per-frame work,
// the pipeline (package sidecar/internal/pipeline), is what is done to one frame, whatever carried
// it, on the connection's protocol state; it touches no socket, buffer or segment, and where a frame
// changes the framing (a v5 STARTUP, a frame changed in place) it returns that effect, which
// the transport applies (conn.apply). A conn holds its pipeline as a named field (conn.pipe,
// so that each call across the seam is visible) and embeds its lifecycle; each
// transport's state is a type of its own that points at the conn (goroutines and its
// goPath, parkState, loopConn and its sides; segments is a view of the conn), so that the
// arrows point one way, transport → conn → pipeline, and every per-frame call is a direct
// call. Where the transports differ on a connection's end, the conn asks its carrier, an
// interface that the transport sets when it takes the connection (see "Layers"). Between the two layers,
// transport.go holds what both transports do with a frame once its header is in:
// reading and checking the header (cql.ParseHeader), the choice of reading a large frame
// whole or streaming it through, taking the request from the stream table for a response,
// the clock read per read, and what follows a queued response.
//
// A connection starts on its own goroutine (Proxy.serveConn), which answers unsupported protocol
// versions and dials the node. Then a plaintext TCP connection moves to an event loop
// (loop*.go, loopio.go): a goroutine, not locked to its OS thread, around a level-triggered epoll
// set of non-blocking sockets, one loop per two of GOMAXPROCS (TRACECAR_EVENT_LOOPS=n
// overrides), shared by every Proxy of the process. A busy loop waits in a raw epoll_wait and
// keeps its P, so GOMAXPROCS grows by one per loop; an idle one (4 ms without events) parks on
// the runtime's poller (loopwait.go); an epoll_wait error closes the loop's connections and
// the loop starts over, it does not end the process. Reads and writes are raw system calls
// too, as they never block. Every ready socket is read into the loop's one buffer, every
// whole frame in it gets the per-frame work and is appended to one output buffer, and that
// goes out in one write; what the peer does not take waits for EPOLLOUT, and the socket
// that fed it is not read until it is gone (backpressure). A frame larger than the read
// buffer is gathered on its own, in a buffer that grows as its bytes arrive, and a client's
// is charged to Config.MaxRequestDataInFlight as on the goroutine path (limits.go).
// Connections that are not plain TCP (TLS: crypto/tls needs a net.Conn), and every
// connection when Config.NoEventLoop is set or TRACECAR_EVENT_LOOP=off, take the goroutine
// path instead (goroutines.go, type goroutines): one goroutine per direction, reading frames from one side
// and writing them to the other, flushing only when no whole frame is left in its input
// buffer, so frames that arrive together leave in one syscall there too.
//
// # Protocol v5
//
// A v5 connection carries its frames in segments (each with a CRC24 on its header and a
// CRC32 on its payload, lz4-compressed or not) once its handshake is done: the READY or
// AUTHENTICATE that answers its STARTUP is the node's last unframed frame, and the switch
// for both directions (segments.go, type segments). The segments are a layer of the transport, between
// the bytes and the frames, on both paths (segments_loop.go for the event loop): whole
// segments are read (their CRCs checked, their frames lined up with them, an lz4 payload
// decompressed, a frame larger than a segment gathered from its segments as they arrive)
// and every frame in them gets the per-frame work below, exactly as a v4 frame does. A
// segment none of whose frames changed is forwarded as it came, CRCs and compression
// included, so the common path re-encodes nothing; a frame changed in place (the tracing
// flag of a sampled request, the probe's skip-metadata bit) gives its uncompressed segment
// a fresh CRC32 only; a segment whose frames changed otherwise (a system table rewritten,
// a tracing id stripped), an lz4 one changed in place, and a large frame are segmented
// again with fresh CRCs (Stats.Resegmented counts them). The proxy's own frames to a v5
// client (a ProtocolError, the errors of a lost node) go in segments too. A client segment
// that fails its checks gets a ProtocolError on stream 0 and its connection closes; one
// from the node counts as a failure of the node connection.
//
// # Per-request work
//
// Both paths do the same work on each frame, through pipeline.request and pipeline.response:
// request inspects a request (STARTUP compression; OPTIONS; the AUTH_RESPONSE username;
// QUERY, PREPARE and EXECUTE of system tables by table reference, with the EXECUTE probe of
// statement.go; the text of a PREPARE), hands it to statement statistics
// (Config.Statements) and to tracing (tracing.Conn.Begin: one atomic load when tracing is
// off), records it in the connection's stream table with the Tickets of both, and counts
// it; the transport takes the record by stream id (pipeline.StreamTable.RequestFor), and response notes the
// end of the handshake, hands the response to statement statistics and tracing (End, with
// the record's Ticket), learns a prepared statement from a RESULT Prepared into the one
// prepared-statement registry (shared with tracing), filters SUPPORTED, rewrites system
// tables and events, and records the latency. The stream table entry (inflight) is the one
// per-request record: tracing keeps none of its own. After the write that carried a traced
// frame, the path tells tracing (conn.wrote: Sent for requests, Done for responses); the
// frame writers know nothing of tracing. Each request is counted once, in the connection's
// counters, which the metrics and the tracer read (Proxy.Stats). Neither request nor
// response allocates with tracing off or in fast mode below the threshold
// (TestRequestPathAllocs); BenchmarkRequestPath measures them per mode.
//
// # Ending a connection
//
// On both transports a connection ends through one state machine, its lifecycle
// (shutdown.go), that only moves forward, by compare-and-swap, so that the frame loops and
// the event loop read it with one atomic load:
//
//	open → draining → ending → closed
//
// Any state may be skipped: a connection ends without draining, and closeAll goes straight
// to closed. The transitions are the same functions on both transports (lifecycle.advance;
// lifecycle.end, which records the cause, the first cause standing); what a state does to the
// sockets is the transport's.
//
//   - draining (conn.drain, from Proxy.drain): no new request is read, and the connection
//     ends with cause "drained" when the last request in flight is answered. On the
//     goroutine path the client's read deadline is set in the past, so the request
//     goroutine forwards what its reader holds and stops, and the last answer is seen by
//     whichever goroutine comes last (the request goroutine when nothing is in flight as it
//     stops; else the response goroutine once it answers the last one). On the loop, the
//     command posted to it stops reading the client (loop.drain), and the loop closes the
//     connection once the last answer is written.
//   - ending (lifecycle.end): a cause is recorded, and the last frames it calls for
//     (conn.lastFrames: the ProtocolError for a malformed client frame; a Server error for
//     each request in flight when the node was lost or could not be written) are written
//     after what is queued for the client, within errWriteTimeout, so that no last frame
//     waits on a client that does not read. On the goroutine path conn.stop, from either
//     goroutine, ends the connection for any cause (a client EOF or read error, a malformed
//     client frame, a failed node read or write, a client write error, or drained): it
//     closes the node socket, which ends the response goroutine's read, and sets the
//     client's read deadline in the past, which ends the request goroutine's. On the loop,
//     loop.end does so only for the causes that owe the client frames; the others (client
//     EOF or error, a client write error, drained) go straight to closed.
//   - closed: both sockets are closed. On the goroutine path this is conn.close, the one
//     close path, on the response goroutine once the request goroutine has stopped (so the
//     set of requests in flight is final), and closeAll. On the loop it is loop.close, run
//     on the loop, which every end leads to and which releases the connection's goroutine
//     in serve. closeAll skips to closed at once, or posts to the loop.
//
// The cause is a field written under conn.mu rather than a context: the goroutines block
// in reads, which a context cannot interrupt, and each wakes from its socket (closed, or a
// deadline in the past) anyway. conn.mu also serialises these steps with setting the node
// socket and with the move to a loop (toLoop), so that drain and closeAll either act on the
// goroutine path or post to the loop. Once a connection is on a loop, only the loop moves
// it past draining.
//
// # Handover
//
// A connection on an event loop can move to another process between two frames (package
// handover, which sidecar imports and which declares what it needs of the proxy;
// handover.go and move_linux.go here): Proxy.Handoff takes it to a quiet point on its
// loop, detaches its two sockets with the bytes read and not forwarded, and sends them over
// the control socket; Proxy.Adopt in the new process makes it one of its own. This does
// not touch the state machine above: a moving connection stays open, and once the new
// process has acknowledged it, it goes straight to closed here. Connections on the
// goroutine path drain instead.
package sidecar
