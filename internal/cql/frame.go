package cql

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// HeaderSize is the size of a v3, v4 or v5 frame header (v5 calls a frame an envelope).
const HeaderSize = 9

// MaxBodySize is the largest frame body any decoder accepts, whatever its configuration:
// 256 MiB, the ceiling Cassandra allows for native_transport_max_frame_size.
const MaxBodySize = 256 << 20

// DefaultMaxFrameSize is the default limit on a client's frame, header included: 16 MiB,
// as Cassandra 4's native_transport_max_frame_size.
const DefaultMaxFrameSize = 16 << 20

// MaxStartupFrameSize limits a client's frames, header included, until its STARTUP has
// been answered and, with authentication, until AUTH_SUCCESS: no message of the handshake
// needs more, so an unauthenticated client cannot make a server hold large buffers.
const MaxStartupFrameSize = 64 << 10

// FrameTooBigMessage is the text of the error that Cassandra 4 sends for a frame whose body
// of bodyLen bytes, with its 9-byte header, exceeds max bytes.
func FrameTooBigMessage(bodyLen uint32, max int) string {
	return fmt.Sprintf("Request is too big: length %d exceeds maximum allowed length %d.", uint64(bodyLen)+HeaderSize, max)
}

// Protocol versions. The high bit of the version byte marks a response.
const (
	V3 byte = 3
	V4 byte = 4
	V5 byte = 5

	// MaxVersion is the highest protocol version of this package.
	MaxVersion = V5

	// ResponseBit is set in the version byte of every frame sent by a server.
	ResponseBit byte = 0x80
)

// Opcode identifies a message.
type Opcode byte

// Opcodes of protocol v4.
const (
	OpError         Opcode = 0x00
	OpStartup       Opcode = 0x01
	OpReady         Opcode = 0x02
	OpAuthenticate  Opcode = 0x03
	OpOptions       Opcode = 0x05
	OpSupported     Opcode = 0x06
	OpQuery         Opcode = 0x07
	OpResult        Opcode = 0x08
	OpPrepare       Opcode = 0x09
	OpExecute       Opcode = 0x0A
	OpRegister      Opcode = 0x0B
	OpEvent         Opcode = 0x0C
	OpBatch         Opcode = 0x0D
	OpAuthChallenge Opcode = 0x0E
	OpAuthResponse  Opcode = 0x0F
	OpAuthSuccess   Opcode = 0x10
)

var opcodeNames = [...]string{
	OpError: "ERROR", OpStartup: "STARTUP", OpReady: "READY", OpAuthenticate: "AUTHENTICATE",
	0x04: "", OpOptions: "OPTIONS", OpSupported: "SUPPORTED", OpQuery: "QUERY", OpResult: "RESULT",
	OpPrepare: "PREPARE", OpExecute: "EXECUTE", OpRegister: "REGISTER", OpEvent: "EVENT",
	OpBatch: "BATCH", OpAuthChallenge: "AUTH_CHALLENGE", OpAuthResponse: "AUTH_RESPONSE",
	OpAuthSuccess: "AUTH_SUCCESS",
}

// String returns the spec's name of the opcode, such as "QUERY".
func (o Opcode) String() string {
	if int(o) < len(opcodeNames) && opcodeNames[o] != "" {
		return opcodeNames[o]
	}
	return fmt.Sprintf("OPCODE(0x%02x)", byte(o))
}

// Frame header flags.
const (
	FlagCompression   byte = 0x01
	FlagTracing       byte = 0x02
	FlagCustomPayload byte = 0x04
	FlagWarning       byte = 0x08
	FlagBeta          byte = 0x10
)

// Errors returned by the decoders.
var (
	// ErrMalformed reports a body or header that does not follow the spec.
	ErrMalformed = errors.New("cql: malformed message")
	// ErrFrameTooBig reports a header whose length exceeds MaxBodySize.
	ErrFrameTooBig = errors.New("cql: frame body too big")
)

// UnsupportedVersionError reports a frame whose protocol version is not 3, 4 or 5.
type UnsupportedVersionError struct {
	Version byte // without the response bit
}

// Error returns the message Cassandra sends for the version, see UnsupportedVersionMessage.
func (e *UnsupportedVersionError) Error() string {
	return UnsupportedVersionMessage(e.Version, MaxVersion)
}

// UnsupportedVersionMessage is the text Cassandra sends in the ProtocolError for a version
// v it does not speak, when the greatest it speaks is max; drivers parse it to downgrade
// (gocql reads the greatest version from it, the Python driver looks for its first words).
func UnsupportedVersionMessage(v, max byte) string {
	return fmt.Sprintf("Invalid or unsupported protocol version (%d); the lowest supported version is 3 and the greatest is %d", v, max)
}

// SupportedVersion reports whether v, without the response bit, is a protocol version
// this package speaks: 3, 4 or 5.
func SupportedVersion(v byte) bool { return v >= V3 && v <= V5 }

// Header is a v3, v4 or v5 frame header. The zero value is not a valid header.
type Header struct {
	Version byte // including ResponseBit for responses
	Flags   byte
	Stream  int16
	Opcode  Opcode
	Length  uint32 // body length
}

// IsResponse reports whether the header has the response bit set.
func (h Header) IsResponse() bool { return h.Version&ResponseBit != 0 }

// ProtoVersion returns the version without the response bit.
func (h Header) ProtoVersion() byte { return h.Version &^ ResponseBit }

// ParseHeader decodes the 9-byte header at the start of b. A version other than 3, 4 or 5
// gives an *UnsupportedVersionError, with the fields of b read as a v3/v4 header when b
// holds 9 bytes, so that a server can answer on the frame's stream (versions 1 and 2 have
// an 8-byte header: callers that answer old clients inspect b[0] themselves). A length over
// MaxBodySize gives ErrFrameTooBig, with the header.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < 1 {
		return Header{}, io.ErrUnexpectedEOF
	}
	v := b[0] &^ ResponseBit
	if len(b) < HeaderSize {
		if !SupportedVersion(v) {
			return Header{}, &UnsupportedVersionError{Version: v}
		}
		return Header{}, io.ErrUnexpectedEOF
	}
	// The fields are read into scalars and the Header built once, in the return: a Header
	// local kept in memory and copied out whole made each call wait on a store forward
	// (about twice the time per header), and a data path reads a header per frame.
	stream := int16(binary.BigEndian.Uint16(b[2:4]))
	n := binary.BigEndian.Uint32(b[5:9])
	var err error
	switch {
	case !SupportedVersion(v):
		err = &UnsupportedVersionError{Version: v}
	case n > MaxBodySize:
		err = ErrFrameTooBig
	}
	return Header{Version: b[0], Flags: b[1], Stream: stream, Opcode: Opcode(b[4]), Length: n}, err
}

// AppendHeader appends the encoded header to b.
func AppendHeader(b []byte, h Header) []byte {
	return append(b, h.Version, h.Flags, byte(uint16(h.Stream)>>8), byte(h.Stream), byte(h.Opcode),
		byte(h.Length>>24), byte(h.Length>>16), byte(h.Length>>8), byte(h.Length))
}

// SetBodyLength rewrites the length field of the header at the start of frame.
func SetBodyLength(frame []byte, n int) {
	binary.BigEndian.PutUint32(frame[5:9], uint32(n))
}

// ReadFrame reads one frame from r into buf and returns the header, the body (a sub-slice
// of the returned buffer) and the buffer for reuse. It is ReadFrameMax with MaxBodySize.
func ReadFrame(r io.Reader, buf []byte) (h Header, body []byte, out []byte, err error) {
	return ReadFrameMax(r, buf, MaxBodySize+HeaderSize)
}

// ReadFrameMax reads one frame from r into buf and returns the header, the body (a
// sub-slice of the returned buffer) and the buffer for reuse. A frame longer than max
// bytes, header included, gives ErrFrameTooBig with its header, before any of its body is
// read. The buffer grows as the body arrives, never ahead of it (see AppendRead), so a
// length field that lies costs no more memory than the bytes actually sent.
func ReadFrameMax(r io.Reader, buf []byte, max int) (h Header, body []byte, out []byte, err error) {
	if cap(buf) < HeaderSize {
		buf = make([]byte, 0, 4096)
	}
	buf = buf[:HeaderSize]
	if _, err = io.ReadFull(r, buf[:1]); err != nil {
		return h, nil, buf, err
	}
	if v := buf[0] &^ ResponseBit; !SupportedVersion(v) {
		return h, nil, buf, &UnsupportedVersionError{Version: v}
	}
	if _, err = io.ReadFull(r, buf[1:HeaderSize]); err != nil {
		return h, nil, buf, noEOF(err)
	}
	if h, err = ParseHeader(buf); err != nil {
		return h, nil, buf, err
	}
	if uint64(h.Length)+HeaderSize > uint64(max) {
		return h, nil, buf, ErrFrameTooBig
	}
	if buf, err = AppendRead(buf, r, int(h.Length)); err != nil {
		return h, nil, buf, err
	}
	return h, buf[HeaderSize:], buf, nil
}

// growStep is the first capacity that AppendRead allocates; it then doubles.
const growStep = 64 << 10

// AppendRead reads exactly n bytes from r and appends them to buf. When buf lacks room, it
// grows as the bytes arrive, by doubling from 64 KiB, so that the memory allocated is at
// most about four times the bytes received, whatever n claims. A short read gives
// io.ErrUnexpectedEOF, with buf holding what arrived.
func AppendRead(buf []byte, r io.Reader, n int) ([]byte, error) {
	want := len(buf) + n
	if cap(buf) >= want {
		buf = buf[:want]
		_, err := io.ReadFull(r, buf[want-n:])
		return buf, noEOF(err)
	}
	for len(buf) < want {
		if len(buf) == cap(buf) {
			nb := make([]byte, len(buf), min(want, max(2*cap(buf), growStep)))
			copy(nb, buf)
			buf = nb
		}
		m, err := r.Read(buf[len(buf):min(cap(buf), want)])
		buf = buf[:len(buf)+m]
		if err != nil && len(buf) < want {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return buf, err
		}
	}
	return buf, nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
