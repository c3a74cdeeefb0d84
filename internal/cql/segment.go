package cql

import (
	"encoding/binary"
	"errors"
	"hash/crc32"

	"github.com/pierrec/lz4/v4"
)

// Protocol v5 carries its frames (the spec calls them envelopes) in segments, once the
// handshake is done: STARTUP and the OPTIONS before it, and SUPPORTED, READY or
// AUTHENTICATE that answer them, are unframed; every byte after READY or AUTHENTICATE, in
// both directions, is a segment. A segment is a header, a payload of at most
// MaxSegmentPayload bytes and the CRC32 of the payload. All their integers are
// little-endian, unlike the frames they carry.
//
//	uncompressed header: 3 bytes: payload length (17 bits), self-contained (1 bit)
//	                     3 bytes: CRC24 of those 3 bytes
//	lz4 header:          5 bytes: payload length (17 bits), uncompressed length (17 bits,
//	                              0: the payload is not compressed), self-contained (1 bit)
//	                     3 bytes: CRC24 of those 5 bytes
//
// A self-contained segment holds whole frames, one or more; a frame larger than a segment
// is split over segments that are not self-contained, the first starting with its header.
// The connection's STARTUP chose the format: COMPRESSION lz4 means the lz4 header on every
// segment (a sender may still store a payload uncompressed); no compression, the other.

// MaxSegmentPayload is the largest payload of a segment, as the 17-bit length allows:
// 128 KiB less one byte.
const MaxSegmentPayload = 1<<17 - 1

// Sizes of a segment's parts.
const (
	SegmentHeaderSize    = 6 // uncompressed format: 3 bytes and their CRC24
	SegmentHeaderSizeLZ4 = 8 // lz4 format: 5 bytes and their CRC24
	SegmentTrailerSize   = 4 // the payload's CRC32
)

// segmentHeaderSize returns the header size of the format.
func segmentHeaderSize(lz4 bool) int {
	if lz4 {
		return SegmentHeaderSizeLZ4
	}
	return SegmentHeaderSize
}

// Errors of segments. Both mean that the bytes cannot be trusted: a receiver answers with
// a ProtocolError and closes the connection.
var (
	// ErrSegmentCRC reports a segment whose header or payload does not match its CRC.
	ErrSegmentCRC = errors.New("cql: segment CRC mismatch")
	// ErrSegmentFraming reports segments whose frames do not line up with them: a
	// self-contained segment ending inside a frame, a large frame's segments overrunning
	// it or interrupted by a self-contained one, a compressed payload that does not
	// decompress to its announced length.
	ErrSegmentFraming = errors.New("cql: frames do not line up with their segments")
)

const (
	crc24Init = 0x875060
	crc24Poly = 0x1974F0B
)

// crc24Table is the byte-at-a-time table of the CRC24 of segment headers.
var crc24Table = func() (t [256]uint32) {
	for i := range t {
		crc := uint32(i) << 16
		for range 8 {
			crc <<= 1
			if crc&0x1000000 != 0 {
				crc ^= crc24Poly
			}
		}
		t[i] = crc
	}
	return t
}()

// CRC24 returns the CRC24 of the n low bytes of v, least significant first (the order of
// a little-endian header on the wire), as the spec defines it: initial value 0x875060,
// polynomial 0x1974F0B.
func CRC24(v uint64, n int) uint32 {
	crc := uint32(crc24Init)
	for range n {
		crc = crc<<8&0xffffff ^ crc24Table[byte(crc>>16)^byte(v)]
		v >>= 8
	}
	return crc
}

// crc32Init is the state after the four bytes that Cassandra's payload CRC32 starts from
// (0xFA 0x2D 0x55 0xCA), so that an all-zero payload does not have a zero CRC.
var crc32Init = crc32.ChecksumIEEE([]byte{0xfa, 0x2d, 0x55, 0xca})

// CRC32 returns the CRC32 of a segment's payload, as it is on the wire (compressed or
// not): IEEE CRC32 continued from Cassandra's four initial bytes.
func CRC32(payload []byte) uint32 { return crc32.Update(crc32Init, crc32.IEEETable, payload) }

// SegmentHeader is a decoded segment header.
type SegmentHeader struct {
	// Length is the size of the payload on the wire.
	Length int
	// Uncompressed is the size of the payload once decompressed, in the lz4 format; 0
	// means it was sent as is (always, in the uncompressed format).
	Uncompressed int
	// SelfContained says that the payload is whole frames.
	SelfContained bool
}

// Size returns the size of the segment on the wire, header and trailer included.
func (h SegmentHeader) Size(lz4 bool) int {
	return segmentHeaderSize(lz4) + h.Length + SegmentTrailerSize
}

// ParseSegmentHeader decodes the segment header at the start of b, which must hold at
// least its size (SegmentHeaderSize, or SegmentHeaderSizeLZ4 with lz4), and checks its
// CRC24: a mismatch is ErrSegmentCRC.
func ParseSegmentHeader(b []byte, lz4 bool) (SegmentHeader, error) {
	n := 3
	if lz4 {
		n = 5
	}
	if len(b) < n+3 {
		return SegmentHeader{}, ErrMalformed
	}
	var v uint64
	for i := n - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	crc := uint32(b[n]) | uint32(b[n+1])<<8 | uint32(b[n+2])<<16
	if CRC24(v, n) != crc {
		return SegmentHeader{}, ErrSegmentCRC
	}
	h := SegmentHeader{Length: int(v & MaxSegmentPayload)}
	v >>= 17
	if lz4 {
		h.Uncompressed = int(v & MaxSegmentPayload)
		v >>= 17
	}
	h.SelfContained = v&1 != 0
	return h, nil
}

// AppendSegmentHeader appends the header of a segment to b, with its CRC24. Length and
// Uncompressed must not exceed MaxSegmentPayload; Uncompressed is written only with lz4.
func AppendSegmentHeader(b []byte, h SegmentHeader, lz4 bool) []byte {
	v := uint64(h.Length)
	n, flag := 3, 17
	if lz4 {
		v |= uint64(h.Uncompressed) << 17
		n, flag = 5, 34
	}
	if h.SelfContained {
		v |= 1 << flag
	}
	crc := CRC24(v, n)
	for range n {
		b = append(b, byte(v))
		v >>= 8
	}
	return append(b, byte(crc), byte(crc>>8), byte(crc>>16))
}

// AppendSegment appends one segment carrying payload (at most MaxSegmentPayload bytes) to
// b. With lz4 the payload is compressed when that makes it smaller, and stored as is
// otherwise.
func AppendSegment(b, payload []byte, selfContained, lz4 bool) []byte {
	if lz4 && len(payload) > 0 {
		if out, ok := appendCompressedSegment(b, payload, selfContained); ok {
			return out
		}
	}
	b = AppendSegmentHeader(b, SegmentHeader{Length: len(payload), SelfContained: selfContained}, lz4)
	b = append(b, payload...)
	return binary.LittleEndian.AppendUint32(b, CRC32(payload))
}

// appendCompressedSegment appends payload as an lz4 segment, compressed straight into b
// after room for the header, and reports false, with b unchanged, when compression does
// not make it smaller.
func appendCompressedSegment(b, payload []byte, selfContained bool) ([]byte, bool) {
	start := len(b)
	at := start + SegmentHeaderSizeLZ4
	out := grow(b, SegmentHeaderSizeLZ4+lz4.CompressBlockBound(len(payload)))
	c := lz4Pool.Get().(*lz4.Compressor)
	n, err := c.CompressBlock(payload, out[at:])
	lz4Pool.Put(c)
	if err != nil || n == 0 || n >= len(payload) {
		return b, false
	}
	AppendSegmentHeader(out[start:start], SegmentHeader{Length: n, Uncompressed: len(payload), SelfContained: selfContained}, true)
	out = out[:at+n]
	return binary.LittleEndian.AppendUint32(out, CRC32(out[at:])), true
}

// AppendSegments appends frames, whole frames back to back, to b as segments: frames that
// fit together go in one self-contained segment, up to MaxSegmentPayload bytes, and a
// frame larger than that in a run of segments that are not self-contained. Bytes after the
// last whole frame are written as if they were one more frame. With lz4 each payload is
// compressed when that makes it smaller.
func AppendSegments(b, frames []byte, lz4 bool) []byte {
	for len(frames) > 0 {
		n := 0 // the whole frames that fit one segment
		for n < len(frames) {
			size := len(frames) - n
			if size >= HeaderSize {
				size = min(size, HeaderSize+int(binary.BigEndian.Uint32(frames[n+5:n+9])))
			}
			if n+size > MaxSegmentPayload {
				break
			}
			n += size
		}
		if n > 0 {
			b = AppendSegment(b, frames[:n], true, lz4)
			frames = frames[n:]
			continue
		}
		// The first frame does not fit one segment.
		size := min(len(frames), HeaderSize+int(binary.BigEndian.Uint32(frames[5:9])))
		for part := frames[:size]; len(part) > 0; {
			k := min(len(part), MaxSegmentPayload)
			b = AppendSegment(b, part[:k], false, lz4)
			part = part[k:]
		}
		frames = frames[size:]
	}
	return b
}

// SegmentReader takes segments in order and gives back the frames they carry, checking
// both CRCs of each and that its frames line up with it. It holds what a frame larger than
// one segment has received so far, and the decompressed payload of the last lz4 segment.
// The zero value reads the uncompressed format with no limit on large frames but
// MaxBodySize. A SegmentReader is not safe for concurrent use.
type SegmentReader struct {
	// LZ4 says that the segments have the lz4 header (COMPRESSION lz4 in STARTUP).
	LZ4 bool
	// CheckLarge, when set, is called with the 9-byte header of a frame larger than a
	// segment, as its first segment arrives and before any of it is kept: an error stops
	// the reading, and Next returns it. A caller checks the frame's size against its limit
	// here, so that the frame is never gathered when it is refused.
	CheckLarge func(header []byte) error

	large []byte // the frame being gathered from segments that are not self-contained
	need  int    // its size, header included, once its first segment is in; 0 otherwise
	buf   []byte // the payload of the last lz4 segment, decompressed
	self  bool   // the last segment was self-contained
	plain bool   // the frames of the last segment are its payload as on the wire
}

// maxKeptSegmentBuffer bounds the buffers a SegmentReader keeps between frames, so that an
// idle connection stays small after a rare large frame.
const maxKeptSegmentBuffer = 1 << 20

// Gathering reports whether a frame larger than one segment has started and is not whole
// yet.
func (r *SegmentReader) Gathering() bool { return r.need > 0 }

// SelfContained reports whether the last segment that Next read whole was self-contained.
func (r *SegmentReader) SelfContained() bool { return r.self }

// InPlace reports whether the frames that Next returned last are the payload of the
// segment as it is on the wire (self-contained, not compressed): a caller that changes them
// in place needs only to write the segment's CRC32 again.
func (r *SegmentReader) InPlace() bool { return r.plain }

// HeaderSize returns the size of the segment headers r reads.
func (r *SegmentReader) HeaderSize() int { return segmentHeaderSize(r.LZ4) }

// Peek reports the size on the wire of the segment at the start of b, once its header is
// there (0 before), after checking the header's CRC24.
func (r *SegmentReader) Peek(b []byte) (int, error) {
	if len(b) < segmentHeaderSize(r.LZ4) {
		return 0, nil
	}
	h, err := ParseSegmentHeader(b, r.LZ4)
	if err != nil {
		return 0, err
	}
	return h.Size(r.LZ4), nil
}

// Next reads the segment at the start of b. When b holds less than the whole segment, n
// is 0 and need is the segment's size once its header is in (0 before). Otherwise n is the
// segment's size and frames are the whole frames it completes: its payload (decompressed)
// when it is self-contained; the frame it ends when it is the last of a large frame's
// segments; nil when it continues one. frames alias b, or r's buffers until the next call.
//
// A segment that fails its CRCs, or whose frames do not line up with it, is an error
// (ErrSegmentCRC, ErrSegmentFraming); so is what CheckLarge returns.
func (r *SegmentReader) Next(b []byte) (n, need int, frames []byte, err error) {
	hs := segmentHeaderSize(r.LZ4)
	if len(b) < hs {
		return 0, 0, nil, nil
	}
	h, err := ParseSegmentHeader(b, r.LZ4)
	if err != nil {
		return 0, 0, nil, err
	}
	size := hs + h.Length + SegmentTrailerSize
	if len(b) < size {
		return 0, size, nil, nil
	}
	payload := b[hs : hs+h.Length]
	if CRC32(payload) != binary.LittleEndian.Uint32(b[hs+h.Length:]) {
		return 0, 0, nil, ErrSegmentCRC
	}
	r.self, r.plain = h.SelfContained, h.SelfContained && h.Uncompressed == 0
	if h.Uncompressed > 0 {
		if payload, err = r.decompress(payload, h.Uncompressed); err != nil {
			return 0, 0, nil, err
		}
	}
	if frames, err = r.frames(payload, h.SelfContained); err != nil {
		return 0, 0, nil, err
	}
	return size, 0, frames, nil
}

// decompress returns the lz4 payload decompressed into r.buf, which must come out at
// exactly n bytes.
func (r *SegmentReader) decompress(payload []byte, n int) ([]byte, error) {
	if cap(r.buf) > maxKeptSegmentBuffer {
		r.buf = nil
	}
	r.buf = grow(r.buf[:0], n)
	got, err := lz4.UncompressBlock(payload, r.buf)
	if err != nil || got != n {
		return nil, ErrSegmentFraming
	}
	return r.buf, nil
}

// frames checks that a decoded payload lines up with the frames, and returns the frames
// it completes.
func (r *SegmentReader) frames(payload []byte, selfContained bool) ([]byte, error) {
	switch {
	case selfContained && r.need > 0:
		return nil, ErrSegmentFraming // a large frame was cut short
	case selfContained:
		for rest := payload; len(rest) > 0; {
			if len(rest) < HeaderSize {
				return nil, ErrSegmentFraming
			}
			size := HeaderSize + uint64(binary.BigEndian.Uint32(rest[5:9]))
			if size > uint64(len(rest)) {
				return nil, ErrSegmentFraming
			}
			rest = rest[size:]
		}
		return payload, nil
	case r.need == 0:
		// The first segment of a large frame: its header is here, and more than this
		// segment of it follows.
		if len(payload) < HeaderSize {
			return nil, ErrSegmentFraming
		}
		size := HeaderSize + uint64(binary.BigEndian.Uint32(payload[5:9]))
		if size <= uint64(len(payload)) {
			return nil, ErrSegmentFraming
		}
		if r.CheckLarge != nil {
			if err := r.CheckLarge(payload[:HeaderSize]); err != nil {
				return nil, err
			}
		}
		if size > MaxBodySize+HeaderSize {
			return nil, ErrFrameTooBig
		}
		if cap(r.large) > maxKeptSegmentBuffer {
			r.large = nil
		}
		// The frame grows as its segments arrive, never from its length field.
		r.large = append(r.large[:0], payload...)
		r.need = int(size)
		return nil, nil
	}
	if len(r.large)+len(payload) > r.need {
		return nil, ErrSegmentFraming
	}
	r.large = append(r.large, payload...)
	if len(r.large) < r.need {
		return nil, nil
	}
	r.need = 0
	return r.large, nil
}
