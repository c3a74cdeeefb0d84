package node

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/engine"
)

// maxRejectBody bounds what is read of a frame of an unsupported version before answering.
const maxRejectBody = 1 << 20

// serve reads the connection's frames, unframed or from segments, and answers each in
// turn, until the client leaves or a frame closes the connection.
func (c *conn) serve() {
	defer c.nc.Close()
	for {
		limit := c.frameLimit()
		var h cql.Header
		var body []byte
		var err error
		if c.seg != nil {
			h, body, err = c.seg.next(c.br, limit)
		} else {
			first, perr := c.br.Peek(1)
			if perr != nil {
				return
			}
			if v := first[0] &^ cql.ResponseBit; !c.s.speaks(v) {
				c.rejectVersion(v)
				return
			}
			var in []byte
			h, body, in, err = cql.ReadFrameMax(c.br, c.in, limit)
			c.in = in
			if cap(c.in) > maxKeptBuffer {
				c.in = nil // a rare large frame does not stay with an idle connection
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, net.ErrClosed) {
				c.s.logger().Debug().Err(err).Stringer("client", c.nc.RemoteAddr()).Msg("closing connection on bad frame")
			}
			var bad *errSegment
			switch {
			case errors.Is(err, cql.ErrFrameTooBig):
				c.sendError(h, protocolError(cql.FrameTooBigMessage(h.Length, limit)))
				c.w.write(c.out, true)
			case errors.As(err, &bad):
				// As Cassandra does with a corrupt frame: a ProtocolError, and the close.
				c.sendError(cql.Header{Version: cql.V5}, protocolError("Invalid segment: "+bad.err.Error()))
				c.w.write(c.out, true)
			}
			return
		}
		if err := c.handle(h, body); err != nil {
			c.w.write(c.out, true) // the error that closes the connection goes out first
			return
		}
		if err := c.w.write(c.out, c.idle() || c.segments); err != nil {
			return
		}
		c.out = c.out[:0]
		if c.segments {
			c.segments = false
			c.startSegments(c.segLZ4)
		}
	}
}

// rejectVersion answers a frame of a protocol version the node does not speak with the
// ProtocolError that Cassandra sends, in a header the client can parse, then closes.
func (c *conn) rejectVersion(v byte) {
	var stream uint16
	headerLen := cql.HeaderSize
	if v < cql.V3 {
		headerLen = 8
	}
	hdr := make([]byte, headerLen)
	if _, err := io.ReadFull(c.br, hdr); err != nil {
		return
	}
	n := binary.BigEndian.Uint32(hdr[headerLen-4:])
	if v < cql.V3 {
		stream = uint16(hdr[2])
	} else {
		stream = binary.BigEndian.Uint16(hdr[2:4])
	}
	if n <= maxRejectBody {
		io.CopyN(io.Discard, c.br, int64(n))
	}
	body := cql.Error{Code: cql.ErrCodeProtocol, Message: cql.UnsupportedVersionMessage(v, c.s.maxVersion())}.AppendBody(nil, cql.V4)
	var out []byte
	if v < cql.V3 {
		out = append(out, cql.ResponseBit|v, 0, byte(stream), byte(cql.OpError))
		out = binary.BigEndian.AppendUint32(out, uint32(len(body)))
	} else {
		rv := cql.ResponseBit | cql.V4
		out = cql.AppendHeader(out, cql.Header{Version: rv, Stream: int16(stream), Opcode: cql.OpError, Length: uint32(len(body))})
	}
	out = append(out, body...)
	c.w.write(out, true)
	c.s.logger().Debug().Uint8("version", v).Stringer("client", c.nc.RemoteAddr()).Msg("rejected protocol version")
}

// errClose makes serve close the connection after flushing what was written.
var errClose = errors.New("close connection")

func (c *conn) respHeader(h cql.Header) cql.Header {
	return cql.Header{Version: cql.ResponseBit | h.ProtoVersion(), Stream: h.Stream}
}

func (c *conn) send(h cql.Header, flags byte, prefix cql.ResponsePrefix, m cql.Message) {
	rh := c.respHeader(h)
	rh.Flags = flags
	comp := c.comp
	if !c.started || h.Opcode == cql.OpStartup {
		comp = nil
	}
	out, err := cql.AppendResponseFrame(c.out, rh, prefix, m, comp)
	if err != nil {
		out, _ = cql.AppendResponseFrame(c.out, rh, prefix, cql.Error{Code: cql.ErrCodeServer, Message: err.Error()}, nil)
	}
	c.out = out
}

// dropProtocolErrors, set only by tests, drops every ProtocolError instead of sending it:
// the broken build that the bad-frame tests must catch. It is read on the error path only.
var dropProtocolErrors atomic.Bool

func (c *conn) sendError(h cql.Header, e cql.Error) {
	if e.Code == cql.ErrCodeProtocol && dropProtocolErrors.Load() {
		return
	}
	c.send(h, 0, cql.ResponsePrefix{}, e)
}

func protocolError(msg string) cql.Error { return cql.Error{Code: cql.ErrCodeProtocol, Message: msg} }

// handle answers one request frame h with its body, in the connection's order: the
// handshake (OPTIONS, STARTUP, AUTH_RESPONSE) at any time, the rest once the connection is
// ready. An error closes the connection once what was written is flushed.
func (c *conn) handle(h cql.Header, body []byte) error {
	body, ok, err := c.unwrap(h, body)
	if !ok {
		return err
	}
	c.s.requests.Add(1)
	switch h.Opcode {
	case cql.OpOptions:
		c.options(h)
		return nil
	case cql.OpStartup:
		return c.startup(h, body)
	case cql.OpAuthResponse:
		return c.authResponse(h, body)
	}
	if !c.started {
		c.sendError(h, protocolError("Unexpected message "+h.Opcode.String()+", expecting STARTUP or OPTIONS"))
		return nil
	}
	if !c.ready {
		c.sendError(h, cql.Error{Code: cql.ErrCodeUnauthorized, Message: "You have not logged in"})
		return nil
	}
	switch h.Opcode {
	case cql.OpRegister:
		c.register(h, body)
		return nil
	case cql.OpQuery, cql.OpPrepare, cql.OpExecute, cql.OpBatch:
		c.request(h, body)
		return nil
	}
	c.sendError(h, protocolError("Unexpected message "+h.Opcode.String()))
	return nil
}

// unwrap checks the frame h against the connection (a request, of the connection's
// version) and returns its message: body decompressed, the custom payload left out. When
// not ok, the frame got an error, and err says that the connection closes.
func (c *conn) unwrap(h cql.Header, body []byte) (msg []byte, ok bool, err error) {
	if h.IsResponse() {
		c.sendError(h, protocolError("Invalid frame: a client sent a response frame"))
		return nil, false, errClose
	}
	if c.version == 0 {
		c.version = h.ProtoVersion()
	} else if h.ProtoVersion() != c.version {
		c.sendError(h, protocolError("Invalid message version. Got "+strconv.Itoa(int(h.ProtoVersion()))+" but previous messages on this connection had version "+strconv.Itoa(int(c.version))))
		return nil, false, nil
	}
	if h.Flags&cql.FlagCompression != 0 && h.ProtoVersion() < cql.V5 {
		// v5 compresses segments, not frames: the flag is deprecated and ignored there.
		if c.comp == nil {
			c.sendError(h, protocolError("Frame is compressed but no compression was negotiated in STARTUP"))
			return nil, false, errClose
		}
		d, err := c.comp.Decompress(c.dbuf[:0], body)
		if err != nil {
			c.sendError(h, protocolError("Invalid compressed frame body: "+err.Error()))
			return nil, false, errClose
		}
		c.dbuf, body = d, d
	}
	if h.Flags&cql.FlagCustomPayload != 0 {
		_, rest, err := cql.ParseRequestPrefix(h.Flags, body)
		if err != nil {
			c.sendError(h, protocolError("Invalid custom payload"))
			return nil, false, errClose
		}
		body = rest
	}
	return body, true, nil
}

// options answers OPTIONS with SUPPORTED: the CQL version, the compressions and protocol
// versions the node speaks, and ScyllaDB's keys when it emulates one.
func (c *conn) options(h cql.Header) {
	opts := map[string][]string{
		"CQL_VERSION":       {"3.4.6"},
		"COMPRESSION":       {"lz4", "snappy"},
		"PROTOCOL_VERSIONS": c.s.protocolVersions(),
	}
	if c.s.cfg.ScyllaSupported {
		c.scyllaOptions(opts)
	}
	c.send(h, 0, cql.ResponsePrefix{}, cql.Supported{Options: opts})
}

// register answers REGISTER: the connection gets the events of the types it names from
// now on, or a ProtocolError for a type that is none of them.
func (c *conn) register(h cql.Header, body []byte) {
	r, err := cql.DecodeRegister(body)
	if err != nil {
		c.sendError(h, protocolError("Invalid REGISTER message: "+err.Error()))
		return
	}
	for _, e := range r.Events {
		switch e {
		case cql.EventSchemaChange:
			c.wantsSchemaEvents.Store(true)
		case cql.EventStatusChange:
			c.wantsStatusEvents.Store(true)
		case cql.EventTopologyChange:
			c.wantsTopologyEvents.Store(true)
		default:
			c.sendError(h, protocolError("Invalid value '"+e+"' for Type"))
			return
		}
	}
	c.send(h, 0, cql.ResponsePrefix{}, cql.Ready{})
}

func (c *conn) startup(h cql.Header, body []byte) error {
	m, err := cql.DecodeStartup(body)
	if err != nil {
		c.sendError(h, protocolError("Invalid STARTUP message: "+err.Error()))
		return errClose
	}
	if _, ok := m.Options["CQL_VERSION"]; !ok {
		c.sendError(h, protocolError("Missing value CQL_VERSION in STARTUP message"))
		return nil
	}
	comp := cql.Compressor(nil)
	if name, ok := m.Options["COMPRESSION"]; ok && name != "" {
		if comp = cql.CompressorByName(name); comp == nil {
			c.sendError(h, protocolError("Unknown compression algorithm: "+name))
			return nil
		}
	}
	if h.ProtoVersion() >= cql.V5 {
		// v5 compresses segments, with lz4 only; frames are never compressed.
		if comp != nil && comp.Name() != "lz4" {
			c.sendError(h, protocolError("Unsupported compression algorithm for protocol version V5: "+comp.Name()))
			return nil
		}
		// The first STARTUP chose the segments' format for good.
		c.segments, c.segLZ4, comp = c.seg == nil, comp != nil, nil
	}
	c.started, c.comp = true, comp
	if c.s.user != "" {
		c.send(h, 0, cql.ResponsePrefix{}, cql.Authenticate{Authenticator: PasswordAuthenticator})
		return nil
	}
	c.ready = true
	c.send(h, 0, cql.ResponsePrefix{}, cql.Ready{})
	return nil
}

func (c *conn) authResponse(h cql.Header, body []byte) error {
	if !c.started || c.s.user == "" {
		c.sendError(h, protocolError("Unexpected AUTH_RESPONSE: authentication is not in progress"))
		return nil
	}
	m, err := cql.DecodeAuthResponse(body)
	if err != nil {
		c.sendError(h, protocolError("Invalid AUTH_RESPONSE message: "+err.Error()))
		return errClose
	}
	// SASL PLAIN: [authzid] NUL authcid NUL passwd
	parts := bytes.Split(m.Token, []byte{0})
	if len(parts) != 3 {
		c.sendError(h, cql.Error{Code: cql.ErrCodeBadCredentials, Message: "Authentication failed: malformed SASL PLAIN token"})
		return nil
	}
	role, err := c.s.engine.Login(string(parts[1]), string(parts[2]))
	if err != nil {
		c.sendError(h, toCQLError(err))
		return nil
	}
	c.sess.User = role
	c.ready = true
	c.send(h, 0, cql.ResponsePrefix{}, cql.AuthSuccess{})
	return nil
}

// trace collects the events of one traced request.
type trace struct {
	start  time.Time
	id     [16]byte
	source netip.Addr
	events []engine.TraceEvent
}

// Event implements Tracer.
func (t *trace) Event(activity string) {
	now := time.Now()
	t.events = append(t.events, engine.TraceEvent{
		ID:            cql.NewTimeUUID(now),
		Activity:      activity,
		Source:        t.source,
		SourceElapsed: now.Sub(t.start),
		Thread:        "Native-Transport-Requests-1",
	})
}

// traced is the trace of a request being handled: tr is nil when it is not traced;
// clientAsked says that its client set the tracing flag; s is what the trace session says
// of the request.
type traced struct {
	tr          *trace
	clientAsked bool
	s           engine.TraceSession
}

// tracer returns the engine's view of the trace, nil when the request is not traced.
func (t *traced) tracer() engine.Tracer {
	if t.tr == nil {
		return nil
	}
	return t.tr
}

// params sets the parameters of the trace session, made by mk only when the request is
// traced.
func (t *traced) params(mk func() map[string]string) {
	if t.tr != nil {
		t.s.Parameters = mk()
	}
}

// request answers QUERY, PREPARE, EXECUTE and BATCH: traced when the client asks for it
// or the node's trace probability samples it.
func (c *conn) request(h cql.Header, body []byte) {
	t := traced{clientAsked: h.Flags&cql.FlagTracing != 0, s: engine.TraceSession{Command: "QUERY"}}
	if t.clientAsked || c.s.sample() { // the clock only then: a read costs 2% of an untraced op
		t.s.StartedAt = time.Now()
		t.tr = &trace{start: t.s.StartedAt, id: cql.NewTimeUUID(t.s.StartedAt), source: c.s.Addr().Addr()}
	}
	var res cql.Message
	var err error
	switch h.Opcode {
	case cql.OpQuery:
		res, err = c.query(h, body, &t)
	case cql.OpPrepare:
		res, err = c.prepare(h, body, &t)
	case cql.OpExecute:
		res, err = c.execute(h, body, &t)
	case cql.OpBatch:
		res, err = c.batch(h, body, &t)
	}
	if err != nil {
		res = toCQLError(err)
	}
	if t.tr == nil {
		c.send(h, 0, cql.ResponsePrefix{}, res)
		return
	}
	c.endTrace(h, t.tr, t.clientAsked, res, t.s)
}

// query runs a QUERY, traced as t says.
func (c *conn) query(h cql.Header, body []byte, t *traced) (cql.Message, error) {
	q, err := cql.DecodeQuery(body, h.ProtoVersion())
	if err != nil {
		return nil, err
	}
	t.s.Request = "Execute CQL3 query"
	c.ownTrace(t, q.Query)
	t.params(func() map[string]string {
		return map[string]string{"query": q.Query, "consistency_level": q.Params.Consistency.String()}
	})
	c.logRequest(h, q.Query)
	return c.s.engine.Query(c.session(q.Params.Flags&cql.QueryWithKeyspace != 0, q.Params.Keyspace), q.Query, &q.Params, t.tracer())
}

// prepare runs a PREPARE, traced as t says.
func (c *conn) prepare(h cql.Header, body []byte, t *traced) (cql.Message, error) {
	p, err := cql.DecodePrepare(body, h.ProtoVersion())
	if err != nil {
		return nil, err
	}
	t.s.Request, t.s.Command = "Preparing CQL3 query", "PREPARE"
	c.ownTrace(t, p.Query)
	t.params(func() map[string]string { return map[string]string{"query": p.Query} })
	c.logRequest(h, p.Query)
	pr, err := c.s.engine.Prepare(c.session(p.Keyspace != "", p.Keyspace), p.Query, t.tracer())
	if err != nil {
		return nil, err
	}
	return pr, nil
}

// execute runs an EXECUTE, traced as t says, decoded into the connection's c.exec, and
// counts it as cross-shard when it is (Config.Shards).
func (c *conn) execute(h cql.Header, body []byte, t *traced) (res cql.Message, err error) {
	e := &c.exec
	defer func() {
		// Keep the values' array, and nothing that it or e pointed into: a large frame's
		// buffer, which serve lets go, must not stay with an idle connection.
		v := e.Params.Values
		clear(v)
		*e = cql.Execute{Params: cql.QueryParams{Values: v[:0]}}
	}()
	if err := cql.DecodeExecuteInto(e, body, h.ProtoVersion()); err != nil {
		return nil, err
	}
	t.s.Command, t.s.Request = "EXECUTE", "Execute CQL3 prepared query"
	t.params(func() map[string]string { return map[string]string{"consistency_level": e.Params.Consistency.String()} })
	c.logRequest(h, hex.EncodeToString(e.ID))
	if h.ProtoVersion() >= cql.V5 {
		res, err = c.s.engine.ExecuteMetadata(&c.sess, e.ID, e.ResultMetadataID, &e.Params, t.tracer())
	} else {
		res, err = c.s.engine.Execute(&c.sess, e.ID, &e.Params, t.tracer())
	}
	if c.s.shardConns != nil {
		c.countShard(e)
	}
	return res, err
}

// batch runs a BATCH, traced as t says.
func (c *conn) batch(h cql.Header, body []byte, t *traced) (cql.Message, error) {
	b, err := cql.DecodeBatch(body, h.ProtoVersion())
	if err != nil {
		return nil, err
	}
	t.s.Command, t.s.Request = "BATCH", "Execute batch of CQL3 queries"
	t.params(func() map[string]string { return map[string]string{"consistency_level": b.Consistency.String()} })
	c.logRequest(h, "batch")
	return c.s.engine.Batch(c.session(b.Flags&cql.QueryWithKeyspace != 0, b.Keyspace), &b, t.tracer())
}

// endTrace writes the trace of a traced request, s with what the request's trace tr
// gathered, and sends its response res: with the tracing id when its client asked for it.
func (c *conn) endTrace(h cql.Header, tr *trace, clientAsked bool, res cql.Message, s engine.TraceSession) {
	if _, isErr := res.(cql.Error); !isErr {
		tr.Event("Request complete")
	}
	s.ID, s.Client, s.Coordinator = tr.id, c.peer, tr.source
	s.Duration, s.Events = time.Since(s.StartedAt), tr.events
	c.s.engine.WriteTrace(s)
	if !clientAsked {
		c.send(h, 0, cql.ResponsePrefix{}, res)
		return
	}
	c.send(h, cql.FlagTracing, cql.ResponsePrefix{TracingID: tr.id, HasTracingID: true}, res)
}

// ownTrace drops the trace t of a request that the node's own trace probability sampled
// when its statement text q carries a secret (cql.CarriesSecret: a role or user
// statement, a password): the node's trace would keep it in plain text, readable by any
// login allowed to read system_traces. A client that sets the tracing flag itself gets its
// trace, as from Cassandra.
func (c *conn) ownTrace(t *traced, q string) {
	if t.tr != nil && !t.clientAsked && cql.CarriesSecret(q) {
		t.tr = nil
	}
}

// session returns the session a request runs in: the connection's, or, for a v5 request
// that names its keyspace, a copy in that keyspace (a USE in it does not outlive it).
func (c *conn) session(withKeyspace bool, ks string) *engine.Session {
	if !withKeyspace || ks == "" {
		return &c.sess
	}
	s := c.sess
	s.Keyspace = ks
	return &s
}

// toCQLError maps an engine error to the ERROR message sent to the client.
func toCQLError(err error) cql.Error {
	var ce cql.Error
	if errors.As(err, &ce) {
		return ce
	}
	var pce *cql.Error
	if errors.As(err, &pce) && pce != nil {
		return *pce
	}
	if errors.Is(err, cql.ErrMalformed) {
		return cql.Error{Code: cql.ErrCodeProtocol, Message: "Invalid message body: " + err.Error()}
	}
	return cql.Error{Code: cql.ErrCodeServer, Message: err.Error()}
}

func (c *conn) logRequest(h cql.Header, what string) {
	if e := c.s.logger().Debug(); e != nil {
		e.Str("op", h.Opcode.String()).Int16("stream", h.Stream).Stringer("client", c.nc.RemoteAddr()).
			Str("keyspace", c.sess.Keyspace).Str("query", what).Msg("request")
	}
}

// wants reports whether the connection REGISTERed for events of type typ.
func (c *conn) wants(typ string) bool {
	switch typ {
	case cql.EventSchemaChange:
		return c.wantsSchemaEvents.Load()
	case cql.EventStatusChange:
		return c.wantsStatusEvents.Load()
	case cql.EventTopologyChange:
		return c.wantsTopologyEvents.Load()
	}
	return false
}

// push sends an event frame to the client, outside the request/response flow.
func (c *conn) push(ev cql.Event) {
	v := c.version
	if v == 0 {
		v = cql.V4
	}
	h := cql.Header{Version: cql.ResponseBit | v, Stream: -1}
	out, err := cql.AppendFrameCompressed(nil, h, ev, c.comp)
	if err != nil {
		return
	}
	c.w.write(out, true)
}

// startSegments switches the connection to v5 segments both ways, once the READY or
// AUTHENTICATE that answers its STARTUP is written, with lz4 when STARTUP asked for it.
func (c *conn) startSegments(lz4 bool) {
	c.seg = &segIn{r: cql.SegmentReader{LZ4: lz4, CheckLarge: c.checkLarge}}
	c.w.startSegments(lz4)
}

// checkLarge refuses a frame larger than a segment, by its header, before it is gathered,
// when it is over the connection's limit.
func (c *conn) checkLarge(hb []byte) error {
	h, _ := cql.ParseHeader(hb)
	if uint64(h.Length)+cql.HeaderSize > uint64(c.frameLimit()) {
		return &frameTooBig{h}
	}
	return nil
}

// idle reports whether the connection has no more input at hand: nothing buffered from
// the socket, and no frame left from the last segment. serve flushes what it wrote then.
func (c *conn) idle() bool {
	return c.br.Buffered() == 0 && (c.seg == nil || len(c.seg.frames) == 0)
}
