package cql

import (
	"bytes"
	"fmt"
	"net/netip"
	"sync"
)

// Message is a message body that can be encoded. Every message type of this package
// implements it with value receivers, so both T and *T are Messages.
type Message interface {
	// Opcode returns the opcode of the frame that carries the message.
	Opcode() Opcode
	// AppendBody appends the encoded body, without any prefix (tracing id, warnings,
	// custom payload), for the given protocol version (without the response bit).
	AppendBody(b []byte, version byte) []byte
}

// AppendFrame appends a whole uncompressed frame to b: the header, with its opcode taken
// from m and its length filled in, then m's body. h.Flags is written as given; a caller that
// sets FlagTracing, FlagWarning or FlagCustomPayload must use AppendResponseFrame or
// AppendRequestFrame so that the body carries the matching prefix. It is safe for concurrent
// use as long as b is not shared.
func AppendFrame(b []byte, h Header, m Message) []byte {
	h.Opcode = m.Opcode()
	start := len(b)
	b = AppendHeader(b, h)
	b = m.AppendBody(b, h.ProtoVersion())
	SetBodyLength(b[start:], len(b)-start-HeaderSize)
	return b
}

// AppendFrameCompressed is AppendFrame that compresses the body with c when c is not nil,
// and then sets FlagCompression in the header. With a nil c it clears FlagCompression and
// writes the body as is.
func AppendFrameCompressed(b []byte, h Header, m Message, c Compressor) ([]byte, error) {
	return appendFrame(b, h, nil, m, c)
}

// AppendResponseFrame appends a whole response frame whose body starts with the prefix p.
// The prefix parts present are chosen by h.Flags (FlagTracing, FlagWarning,
// FlagCustomPayload). The body is compressed with c when c is not nil.
func AppendResponseFrame(b []byte, h Header, p ResponsePrefix, m Message, c Compressor) ([]byte, error) {
	return appendFrame(b, h, func(b []byte) []byte { return AppendResponsePrefix(b, h.Flags, p) }, m, c)
}

// AppendRequestFrame appends a whole request frame whose body starts with customPayload
// when h.Flags has FlagCustomPayload. The body is compressed with c when c is not nil.
func AppendRequestFrame(b []byte, h Header, customPayload map[string][]byte, m Message, c Compressor) ([]byte, error) {
	return appendFrame(b, h, func(b []byte) []byte { return AppendRequestPrefix(b, h.Flags, customPayload) }, m, c)
}

// scratchPool holds buffers for bodies that are built before being compressed. Buffers that
// grew past maxPooledScratch are dropped so that one huge frame does not pin memory.
var scratchPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

const maxPooledScratch = 1 << 20

func appendFrame(b []byte, h Header, prefix func([]byte) []byte, m Message, c Compressor) ([]byte, error) {
	h.Opcode = m.Opcode()
	if c == nil {
		h.Flags &^= FlagCompression
	} else {
		h.Flags |= FlagCompression
	}
	start := len(b)
	b = AppendHeader(b, h)
	if c == nil {
		if prefix != nil {
			b = prefix(b)
		}
		b = m.AppendBody(b, h.ProtoVersion())
		SetBodyLength(b[start:], len(b)-start-HeaderSize)
		return b, nil
	}
	sp := scratchPool.Get().(*[]byte)
	body := (*sp)[:0]
	if prefix != nil {
		body = prefix(body)
	}
	body = m.AppendBody(body, h.ProtoVersion())
	out, err := c.Compress(b, body)
	if cap(body) <= maxPooledScratch {
		*sp = body
		scratchPool.Put(sp)
	}
	if err != nil {
		return b[:start], fmt.Errorf("cql: compress %s body: %w", c.Name(), err)
	}
	SetBodyLength(out[start:], len(out)-start-HeaderSize)
	return out, nil
}

// finish returns d's error, or ErrMalformed when bytes remain unread.
func finish(d *Decoder) error {
	if d.err != nil {
		return d.err
	}
	if len(d.b) != 0 {
		return ErrMalformed
	}
	return nil
}

// Startup is a STARTUP request: its options include CQL_VERSION and optionally
// COMPRESSION. A Startup is safe for concurrent use when not modified.
type Startup struct{ Options map[string]string }

// Opcode returns OpStartup.
func (Startup) Opcode() Opcode { return OpStartup }

// AppendBody appends the [string map] of options.
func (m Startup) AppendBody(b []byte, _ byte) []byte { return AppendStringMap(b, m.Options) }

// DecodeStartup decodes a STARTUP body.
func DecodeStartup(body []byte) (Startup, error) {
	d := Decoder{b: body}
	m := Startup{Options: d.StringMap()}
	if err := finish(&d); err != nil {
		return Startup{}, err
	}
	return m, nil
}

// StartupCompression returns the COMPRESSION option of a STARTUP body (its key in any
// case, the last one if repeated; nil without one), or the error DecodeStartup gives. It
// aliases body and allocates nothing: a relay that wants only this option reads it for
// every new connection.
func StartupCompression(body []byte) ([]byte, error) {
	d := Decoder{b: body}
	n := int(d.Short())
	if d.err != nil || n*4 > len(d.b) {
		d.fail()
	}
	var v []byte
	for i := 0; i < n && d.err == nil; i++ {
		k, val := d.StringBytes(), d.StringBytes()
		if bytes.EqualFold(k, compressionKey) {
			v = val
		}
	}
	if err := finish(&d); err != nil {
		return nil, err
	}
	return v, nil
}

var compressionKey = []byte("COMPRESSION")

// Options is an OPTIONS request, which has an empty body. It is safe for concurrent use.
type Options struct{}

// Opcode returns OpOptions.
func (Options) Opcode() Opcode { return OpOptions }

// AppendBody appends nothing.
func (Options) AppendBody(b []byte, _ byte) []byte { return b }

// Supported is a SUPPORTED response listing the server's STARTUP options, such as
// CQL_VERSION and COMPRESSION. It is safe for concurrent use when not modified.
type Supported struct{ Options map[string][]string }

// Opcode returns OpSupported.
func (Supported) Opcode() Opcode { return OpSupported }

// AppendBody appends the [string multimap] of options.
func (m Supported) AppendBody(b []byte, _ byte) []byte { return AppendStringMultimap(b, m.Options) }

// DecodeSupported decodes a SUPPORTED body.
func DecodeSupported(body []byte) (Supported, error) {
	d := Decoder{b: body}
	m := Supported{Options: d.StringMultimap()}
	if err := finish(&d); err != nil {
		return Supported{}, err
	}
	return m, nil
}

// Ready is a READY response, which has an empty body. It is safe for concurrent use.
type Ready struct{}

// Opcode returns OpReady.
func (Ready) Opcode() Opcode { return OpReady }

// AppendBody appends nothing.
func (Ready) AppendBody(b []byte, _ byte) []byte { return b }

// Authenticate is an AUTHENTICATE response naming the server's authenticator class, such as
// "org.apache.cassandra.auth.PasswordAuthenticator". It is safe for concurrent use.
type Authenticate struct{ Authenticator string }

// Opcode returns OpAuthenticate.
func (Authenticate) Opcode() Opcode { return OpAuthenticate }

// AppendBody appends the authenticator as a [string].
func (m Authenticate) AppendBody(b []byte, _ byte) []byte { return AppendString(b, m.Authenticator) }

// DecodeAuthenticate decodes an AUTHENTICATE body.
func DecodeAuthenticate(body []byte) (Authenticate, error) {
	d := Decoder{b: body}
	m := Authenticate{Authenticator: d.String()}
	if err := finish(&d); err != nil {
		return Authenticate{}, err
	}
	return m, nil
}

// AuthResponse is an AUTH_RESPONSE request carrying a SASL token; for PasswordAuthenticator
// the token is "\x00user\x00password". A nil Token is sent as null. It is safe for
// concurrent use when not modified.
type AuthResponse struct{ Token []byte }

// Opcode returns OpAuthResponse.
func (AuthResponse) Opcode() Opcode { return OpAuthResponse }

// AppendBody appends the token as [bytes].
func (m AuthResponse) AppendBody(b []byte, _ byte) []byte { return AppendBytes(b, m.Token) }

// DecodeAuthResponse decodes an AUTH_RESPONSE body. The token aliases body.
func DecodeAuthResponse(body []byte) (AuthResponse, error) {
	t, err := decodeToken(body)
	return AuthResponse{Token: t}, err
}

// AuthChallenge is an AUTH_CHALLENGE response carrying a SASL token. It is safe for
// concurrent use when not modified.
type AuthChallenge struct{ Token []byte }

// Opcode returns OpAuthChallenge.
func (AuthChallenge) Opcode() Opcode { return OpAuthChallenge }

// AppendBody appends the token as [bytes].
func (m AuthChallenge) AppendBody(b []byte, _ byte) []byte { return AppendBytes(b, m.Token) }

// DecodeAuthChallenge decodes an AUTH_CHALLENGE body. The token aliases body.
func DecodeAuthChallenge(body []byte) (AuthChallenge, error) {
	t, err := decodeToken(body)
	return AuthChallenge{Token: t}, err
}

// AuthSuccess is an AUTH_SUCCESS response carrying a final SASL token, often null. It is
// safe for concurrent use when not modified.
type AuthSuccess struct{ Token []byte }

// Opcode returns OpAuthSuccess.
func (AuthSuccess) Opcode() Opcode { return OpAuthSuccess }

// AppendBody appends the token as [bytes].
func (m AuthSuccess) AppendBody(b []byte, _ byte) []byte { return AppendBytes(b, m.Token) }

// DecodeAuthSuccess decodes an AUTH_SUCCESS body. The token aliases body.
func DecodeAuthSuccess(body []byte) (AuthSuccess, error) {
	t, err := decodeToken(body)
	return AuthSuccess{Token: t}, err
}

func decodeToken(body []byte) ([]byte, error) {
	d := Decoder{b: body}
	t := d.Bytes()
	if err := finish(&d); err != nil {
		return nil, err
	}
	return t, nil
}

// Event types of REGISTER and EVENT.
const (
	EventTopologyChange = "TOPOLOGY_CHANGE"
	EventStatusChange   = "STATUS_CHANGE"
	EventSchemaChange   = "SCHEMA_CHANGE"
)

// Register is a REGISTER request subscribing the connection to event types (EventTopologyChange,
// EventStatusChange, EventSchemaChange). It is safe for concurrent use when not modified.
type Register struct{ Events []string }

// Opcode returns OpRegister.
func (Register) Opcode() Opcode { return OpRegister }

// AppendBody appends the event types as a [string list].
func (m Register) AppendBody(b []byte, _ byte) []byte { return AppendStringList(b, m.Events) }

// DecodeRegister decodes a REGISTER body.
func DecodeRegister(body []byte) (Register, error) {
	d := Decoder{b: body}
	m := Register{Events: d.StringList()}
	if err := finish(&d); err != nil {
		return Register{}, err
	}
	return m, nil
}

// Event is an EVENT response, pushed on stream -1 to connections that registered for it.
// Topology and status events use Change and Addr; schema events use Schema. It is safe for
// concurrent use when not modified.
type Event struct {
	Type   string         // EventTopologyChange, EventStatusChange or EventSchemaChange
	Change string         // NEW_NODE, REMOVED_NODE, MOVED_NODE, UP or DOWN (topology and status)
	Addr   netip.AddrPort // the node's address (topology and status)
	Schema SchemaChange   // schema events
}

// Opcode returns OpEvent.
func (Event) Opcode() Opcode { return OpEvent }

// AppendBody appends the event type and its fields.
func (m Event) AppendBody(b []byte, _ byte) []byte {
	b = AppendString(b, m.Type)
	if m.Type == EventSchemaChange {
		return appendSchemaChange(b, m.Schema)
	}
	return AppendInet(AppendString(b, m.Change), m.Addr)
}

// DecodeEvent decodes an EVENT body. An unknown event type is ErrMalformed.
func DecodeEvent(body []byte) (Event, error) {
	d := Decoder{b: body}
	m := Event{Type: d.String()}
	switch m.Type {
	case EventTopologyChange, EventStatusChange:
		m.Change = d.String()
		m.Addr = d.Inet()
	case EventSchemaChange:
		m.Schema = decodeSchemaChange(&d)
	default:
		d.fail()
	}
	if err := finish(&d); err != nil {
		return Event{}, err
	}
	return m, nil
}

// Schema change targets.
const (
	TargetKeyspace  = "KEYSPACE"
	TargetTable     = "TABLE"
	TargetType      = "TYPE"
	TargetFunction  = "FUNCTION"
	TargetAggregate = "AGGREGATE"
)

// SchemaChange describes a schema change, in an EVENT or a RESULT. ChangeType is CREATED,
// UPDATED or DROPPED; Target is one of the Target constants. Name is empty for keyspaces,
// and ArgTypes is used only by functions and aggregates. It is safe for concurrent use when
// not modified.
type SchemaChange struct {
	ChangeType, Target, Keyspace, Name string
	ArgTypes                           []string
}

func appendSchemaChange(b []byte, s SchemaChange) []byte {
	b = AppendString(AppendString(b, s.ChangeType), s.Target)
	b = AppendString(b, s.Keyspace)
	switch s.Target {
	case TargetKeyspace:
	case TargetFunction, TargetAggregate:
		b = AppendStringList(AppendString(b, s.Name), s.ArgTypes)
	default:
		b = AppendString(b, s.Name)
	}
	return b
}

func decodeSchemaChange(d *Decoder) SchemaChange {
	s := SchemaChange{ChangeType: d.String(), Target: d.String(), Keyspace: d.String()}
	switch s.Target {
	case TargetKeyspace:
	case TargetTable, TargetType:
		s.Name = d.String()
	case TargetFunction, TargetAggregate:
		s.Name = d.String()
		s.ArgTypes = d.StringList()
	default:
		d.fail()
	}
	return s
}

// Error is an ERROR response. It implements error and Message with value receivers, and the
// decoders return it as a value, so use errors.As with a *Error target only for errors that
// were created as pointers. It is safe for concurrent use when not modified.
type Error struct {
	Code    int32
	Message string

	// Keyspace and Table are set for ErrCodeAlreadyExists; Table is empty for a keyspace.
	Keyspace, Table string
	// UnpreparedID is the unknown statement id of ErrCodeUnprepared.
	UnpreparedID []byte
	// Extra holds the raw code-specific bytes that follow the message for every other code
	// (such as the consistency, received and block-for counts of a timeout). It is written
	// back unchanged, so re-encoding is lossless.
	Extra []byte
}

// Opcode returns OpError.
func (Error) Opcode() Opcode { return OpError }

// AppendBody appends the code, the message and the code-specific fields.
func (e Error) AppendBody(b []byte, _ byte) []byte {
	b = AppendString(AppendInt(b, e.Code), e.Message)
	switch e.Code {
	case ErrCodeAlreadyExists:
		return AppendString(AppendString(b, e.Keyspace), e.Table)
	case ErrCodeUnprepared:
		return AppendShortBytes(b, e.UnpreparedID)
	}
	return append(b, e.Extra...)
}

// Error returns the code's name, the code and the server's message, such as
// "cql: invalid (0x2200): unconfigured table t".
func (e Error) Error() string {
	return fmt.Sprintf("cql: %s (0x%04x): %s", ErrorCodeName(e.Code), e.Code, e.Message)
}

var errorCodeNames = map[int32]string{
	ErrCodeServer: "server error", ErrCodeProtocol: "protocol error",
	ErrCodeBadCredentials: "bad credentials", ErrCodeUnavailable: "unavailable",
	ErrCodeOverloaded: "overloaded", ErrCodeBootstrapping: "bootstrapping",
	ErrCodeTruncate: "truncate error", ErrCodeWriteTimeout: "write timeout",
	ErrCodeReadTimeout: "read timeout", ErrCodeReadFailure: "read failure",
	ErrCodeFunctionFailure: "function failure", ErrCodeWriteFailure: "write failure",
	ErrCodeSyntax: "syntax error", ErrCodeUnauthorized: "unauthorized", ErrCodeInvalid: "invalid",
	ErrCodeConfig: "config error", ErrCodeAlreadyExists: "already exists",
	ErrCodeUnprepared: "unprepared",
}

// ErrorCodeName returns a lower-case name for an ERROR code, such as "write timeout", or
// "unknown error" for a code the spec does not define.
func ErrorCodeName(code int32) string {
	if n, ok := errorCodeNames[code]; ok {
		return n
	}
	return "unknown error"
}

// DecodeError decodes an ERROR body. Extra aliases body.
func DecodeError(body []byte) (Error, error) {
	d := Decoder{b: body}
	e := Error{Code: d.Int(), Message: d.String()}
	switch e.Code {
	case ErrCodeAlreadyExists:
		e.Keyspace = d.String()
		e.Table = d.String()
	case ErrCodeUnprepared:
		e.UnpreparedID = d.ShortBytes()
	default:
		if d.err == nil && len(d.b) > 0 {
			e.Extra = d.Rest()
		}
	}
	if err := finish(&d); err != nil {
		return Error{}, err
	}
	return e, nil
}
