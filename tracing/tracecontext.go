package tracing

import (
	"encoding/hex"
)

// W3C Trace Context (https://www.w3.org/TR/trace-context/) in the CQL custom payload.
//
// The Java driver (CASSJAVA-97, advanced.request-id.custom-payload-with-key), gocql
// (Query.CustomPayload), the Python driver (custom_payload=) and the Node.js driver
// (customPayload) can all send an application's traceparent as a custom payload entry, the
// value being the header's text. The sidecar reads it, never changes it (the frame goes to
// the node as it came), and makes the session a span of the caller's trace.

// Payload keys, as the W3C headers name them.
const (
	// TraceparentKey is the default custom payload key of the trace context.
	TraceparentKey = "traceparent"
	// TracestateKey is the key of the vendor-specific part, read with any traceparent key.
	TracestateKey = "tracestate"
)

// traceparentLen is the length of a version 00 traceparent, and the shortest of any
// version: "00-" 32 hex "-" 16 hex "-" 2 hex.
const traceparentLen = 55

// Limits of a tracestate, from the specification: at most 32 list members; 512 bytes is what
// a vendor must at least propagate, and a longer one is discarded here rather than cut.
const (
	maxTraceStateMembers = 32
	maxTraceStateLen     = 512
)

// TraceContext is a W3C trace context read from a request: the caller's trace id, its span
// id (the parent of tracecar's span), its trace flags and its tracestate. The zero value is
// no context. A TraceContext returned by ParseTraceparent or read from a frame may alias the
// frame's bytes in State; copy it to keep it.
type TraceContext struct {
	TraceID [16]byte
	SpanID  [8]byte
	Flags   byte
	// State is the tracestate, already validated, or nil when there was none or it was
	// malformed (then the traceparent still counts, as the specification says).
	State []byte
}

// Valid reports whether tc holds a context: a malformed one is never kept, so a non-zero
// trace id is enough.
func (tc *TraceContext) Valid() bool { return tc.TraceID != [16]byte{} }

// Sampled reports whether the caller recorded its span: the sampled flag, bit 0 of the
// trace flags.
func (tc *TraceContext) Sampled() bool { return tc.Valid() && tc.Flags&0x01 != 0 }

// String returns tc as a traceparent of version 00, or "" for the zero TraceContext.
func (tc TraceContext) String() string {
	if !tc.Valid() {
		return ""
	}
	var b [traceparentLen]byte
	b[0], b[1], b[2] = '0', '0', '-'
	hex.Encode(b[3:35], tc.TraceID[:])
	b[35] = '-'
	hex.Encode(b[36:52], tc.SpanID[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{tc.Flags})
	return string(b[:])
}

// InvalidReason says why a trace context was ignored; it labels
// tracecar_trace_context_invalid_total. The zero value is a valid context.
type InvalidReason uint8

// Reasons for ignoring a traceparent (all of it) or a tracestate (the traceparent stays).
const (
	valid InvalidReason = iota
	// ReasonLength: shorter than 55 bytes, or longer with version 00.
	ReasonLength
	// ReasonVersion: the version is ff or not two lower-case hex digits.
	ReasonVersion
	// ReasonDelimiter: a '-' is missing between the fields, or after them in a later version.
	ReasonDelimiter
	// ReasonHex: the trace id, the parent id or the flags hold a character that is not
	// lower-case hex (upper case included, which the specification forbids).
	ReasonHex
	// ReasonZeroTraceID and ReasonZeroParentID: an id of all zeros, which means none.
	ReasonZeroTraceID
	ReasonZeroParentID
	// ReasonTraceState: the tracestate is malformed (or too long); it is dropped and the
	// traceparent kept.
	ReasonTraceState
	numInvalidReasons
)

var reasonNames = [numInvalidReasons]string{
	valid:              "",
	ReasonLength:       "length",
	ReasonVersion:      "version",
	ReasonDelimiter:    "delimiter",
	ReasonHex:          "hex",
	ReasonZeroTraceID:  "zero_trace_id",
	ReasonZeroParentID: "zero_parent_id",
	ReasonTraceState:   "tracestate",
}

// String returns the reason's label value, such as "length".
func (r InvalidReason) String() string {
	if r < numInvalidReasons {
		return reasonNames[r]
	}
	return "unknown"
}

// InvalidReasons returns the label values of every reason, in a fixed order.
func InvalidReasons() []string {
	out := make([]string, 0, numInvalidReasons-1)
	for r := ReasonLength; r < numInvalidReasons; r++ {
		out = append(out, r.String())
	}
	return out
}

// ParseTraceparent parses a traceparent header value as the W3C specification says: version
// 00 is exactly 55 bytes; a later version is parsed for the fields of version 00 and may
// carry more after a '-'; version ff, upper-case hex and all-zero ids are invalid. It
// returns the context (State unset) and valid (zero) or the reason it is ignored. It does
// not allocate.
func ParseTraceparent(v []byte) (TraceContext, InvalidReason) {
	var tc TraceContext
	if len(v) < traceparentLen {
		return tc, ReasonLength
	}
	ver, ok := hexByte(v[0], v[1])
	if !ok || ver == 0xff {
		return tc, ReasonVersion
	}
	if v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return tc, ReasonDelimiter
	}
	if len(v) > traceparentLen {
		if ver == 0 {
			return tc, ReasonLength
		}
		if v[traceparentLen] != '-' {
			return tc, ReasonDelimiter
		}
	}
	if !decodeHex(tc.TraceID[:], v[3:35]) || !decodeHex(tc.SpanID[:], v[36:52]) {
		return TraceContext{}, ReasonHex
	}
	if tc.Flags, ok = hexByte(v[53], v[54]); !ok {
		return TraceContext{}, ReasonHex
	}
	if tc.TraceID == [16]byte{} {
		return TraceContext{}, ReasonZeroTraceID
	}
	if tc.SpanID == [8]byte{} {
		return TraceContext{}, ReasonZeroParentID
	}
	return tc, valid
}

// lowerHex maps a lower-case hex digit to its value and anything else to 0xff.
var lowerHex = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for c := byte('0'); c <= '9'; c++ {
		t[c] = c - '0'
	}
	for c := byte('a'); c <= 'f'; c++ {
		t[c] = c - 'a' + 10
	}
	return t
}()

func hexByte(hi, lo byte) (byte, bool) {
	h, l := lowerHex[hi], lowerHex[lo]
	return h<<4 | l, (h|l)&0xf0 == 0
}

// decodeHex decodes len(dst)*2 lower-case hex digits of src into dst.
func decodeHex(dst, src []byte) bool {
	var bad byte
	for i := range dst {
		h, l := lowerHex[src[2*i]], lowerHex[src[2*i+1]]
		dst[i] = h<<4 | l
		bad |= h | l
	}
	return bad&0xf0 == 0
}

// ValidTraceState reports whether v is a tracestate the specification allows: at most 32
// comma-separated list members key=value (empty members and optional spaces or tabs around
// the commas allowed), keys of the simple or tenant@system form, no key twice, and here at
// most 512 bytes. It does not allocate.
func ValidTraceState(v []byte) bool {
	if len(v) > maxTraceStateLen {
		return false
	}
	var keys [maxTraceStateMembers][2]uint16 // the keys seen, as offsets into v
	n := 0
	for off := 0; off <= len(v); {
		end := len(v)
		if i := indexByte(v[off:], ','); i >= 0 {
			end = off + i
		}
		member := v[off:end]
		start := off + len(member) - len(trimLeftOWS(member))
		if member = trimOWS(member); len(member) > 0 {
			eq := indexByte(member, '=')
			if eq < 0 || !validTraceStateKey(member[:eq]) || !validTraceStateValue(member[eq+1:]) {
				return false
			}
			if n == maxTraceStateMembers {
				return false
			}
			for _, k := range keys[:n] {
				if string(v[k[0]:k[1]]) == string(member[:eq]) {
					return false
				}
			}
			keys[n] = [2]uint16{uint16(start), uint16(start + eq)}
			n++
		}
		off = end + 1
	}
	return true
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

func trimOWS(b []byte) []byte {
	b = trimLeftOWS(b)
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

func trimLeftOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	return b
}

// keyChar reports whether c may follow the first character of a key: lcalpha, DIGIT, "_",
// "-", "*" or "/".
func keyChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '*' || c == '/'
}

// validTraceStateKey checks simple-key = lcalpha 0*255(keychar), or multi-tenant-key =
// tenant-id "@" system-id, with tenant-id = (lcalpha / DIGIT) 0*240(keychar) and system-id
// = lcalpha 0*13(keychar).
func validTraceStateKey(k []byte) bool {
	at := indexByte(k, '@')
	if at < 0 {
		return len(k) >= 1 && len(k) <= 256 && k[0] >= 'a' && k[0] <= 'z' && allKeyChars(k[1:])
	}
	tenant, system := k[:at], k[at+1:]
	return len(tenant) >= 1 && len(tenant) <= 241 && (tenant[0] >= 'a' && tenant[0] <= 'z' || tenant[0] >= '0' && tenant[0] <= '9') &&
		allKeyChars(tenant[1:]) &&
		len(system) >= 1 && len(system) <= 14 && system[0] >= 'a' && system[0] <= 'z' && allKeyChars(system[1:])
}

func allKeyChars(b []byte) bool {
	for _, c := range b {
		if !keyChar(c) {
			return false
		}
	}
	return true
}

// validTraceStateValue checks value = 0*255(chr) nblk-chr, chr = %x20 / nblk-chr,
// nblk-chr = %x21-2B / %x2D-3C / %x3E-7E (printable ASCII without "," and "=").
func validTraceStateValue(v []byte) bool {
	if len(v) < 1 || len(v) > 256 || v[len(v)-1] == ' ' {
		return false
	}
	for _, c := range v {
		if c < 0x20 || c > 0x7e || c == ',' || c == '=' {
			return false
		}
	}
	return true
}
