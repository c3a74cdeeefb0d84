package cql

import (
	"encoding/binary"
	"math"
	"net/netip"
	"slices"
)

// Decoder reads the spec's notation types ([int], [string], [bytes], …) from a body. It
// keeps the first error and turns every later read into a zero value, so a message decoder
// can read all its fields and check Err once. The zero value decodes an empty body.
//
// A Decoder is not safe for concurrent use. Slices it returns alias the body.
type Decoder struct {
	b   []byte
	err error
}

// NewDecoder returns a Decoder over b.
func NewDecoder(b []byte) *Decoder { return &Decoder{b: b} }

// Reset makes d read b and clears its error.
func (d *Decoder) Reset(b []byte) { d.b, d.err = b, nil }

// Err returns the first error met, or nil.
func (d *Decoder) Err() error { return d.err }

// Len returns the number of unread bytes.
func (d *Decoder) Len() int { return len(d.b) }

// Rest returns the unread bytes and consumes them.
func (d *Decoder) Rest() []byte { b := d.b; d.b = nil; return b }

func (d *Decoder) fail() {
	if d.err == nil {
		d.err = ErrMalformed
	}
	d.b = nil
}

func (d *Decoder) take(n int) []byte {
	if d.err != nil || n < 0 || n > len(d.b) {
		d.fail()
		return nil
	}
	b := d.b[:n:n]
	d.b = d.b[n:]
	return b
}

// Byte reads a [byte].
func (d *Decoder) Byte() byte {
	b := d.take(1)
	if b == nil {
		return 0
	}
	return b[0]
}

// Short reads a [short], an unsigned 16-bit integer.
func (d *Decoder) Short() uint16 {
	b := d.take(2)
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint16(b)
}

// Int reads an [int].
func (d *Decoder) Int() int32 {
	b := d.take(4)
	if b == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(b))
}

// Long reads a [long].
func (d *Decoder) Long() int64 {
	b := d.take(8)
	if b == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b))
}

// String reads a [string]: a [short] length and UTF-8 bytes.
func (d *Decoder) String() string { return string(d.take(int(d.Short()))) }

// StringBytes reads a [string] without copying it.
func (d *Decoder) StringBytes() []byte { return d.take(int(d.Short())) }

// LongString reads a [long string].
func (d *Decoder) LongString() string {
	n := d.Int()
	if n < 0 {
		d.fail()
		return ""
	}
	return string(d.take(int(n)))
}

// LongStringBytes reads a [long string] without copying it.
func (d *Decoder) LongStringBytes() []byte {
	n := d.Int()
	if n < 0 {
		d.fail()
		return nil
	}
	return d.take(int(n))
}

// Bytes reads [bytes]. A negative length is a null value and returns nil; an empty value
// returns a non-nil empty slice.
func (d *Decoder) Bytes() []byte {
	n := d.Int()
	if n < 0 || d.err != nil {
		return nil
	}
	b := d.take(int(n))
	if b == nil && d.err == nil {
		return []byte{}
	}
	return b
}

// Value reads a [value]: like [bytes], but -2 means "not set". It reports notSet for -2.
func (d *Decoder) Value() (v []byte, notSet bool) {
	n := d.Int()
	switch {
	case d.err != nil:
		return nil, false
	case n == -2:
		return nil, true
	case n < 0:
		return nil, false
	}
	b := d.take(int(n))
	if b == nil && d.err == nil {
		b = []byte{}
	}
	return b, false
}

// ShortBytes reads [short bytes].
func (d *Decoder) ShortBytes() []byte { return d.take(int(d.Short())) }

// UUID reads a [uuid].
func (d *Decoder) UUID() (u [16]byte) {
	copy(u[:], d.take(16))
	return u
}

// StringList reads a [string list].
func (d *Decoder) StringList() []string {
	n := int(d.Short())
	if d.err != nil || n*2 > len(d.b) {
		d.fail()
		return nil
	}
	l := make([]string, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		l = append(l, d.String())
	}
	return l
}

// StringMap reads a [string map].
func (d *Decoder) StringMap() map[string]string {
	n := int(d.Short())
	if d.err != nil || n*4 > len(d.b) {
		d.fail()
		return nil
	}
	m := make(map[string]string, n)
	for i := 0; i < n && d.err == nil; i++ {
		k := d.String()
		m[k] = d.String()
	}
	return m
}

// StringMultimap reads a [string multimap].
func (d *Decoder) StringMultimap() map[string][]string {
	n := int(d.Short())
	if d.err != nil || n*4 > len(d.b) {
		d.fail()
		return nil
	}
	m := make(map[string][]string, n)
	for i := 0; i < n && d.err == nil; i++ {
		k := d.String()
		m[k] = d.StringList()
	}
	return m
}

// BytesMap reads a [bytes map], as used by custom payloads.
func (d *Decoder) BytesMap() map[string][]byte {
	n := int(d.Short())
	if d.err != nil || n*6 > len(d.b) {
		d.fail()
		return nil
	}
	m := make(map[string][]byte, n)
	for i := 0; i < n && d.err == nil; i++ {
		k := d.String()
		m[k] = d.Bytes()
	}
	return m
}

// Inet reads an [inet]: a one-byte address size, the address and an [int] port.
func (d *Decoder) Inet() netip.AddrPort {
	n := int(d.Byte())
	if n != 4 && n != 16 {
		d.fail()
		return netip.AddrPort{}
	}
	a, _ := netip.AddrFromSlice(d.take(n))
	p := d.Int()
	return netip.AddrPortFrom(a, uint16(p))
}

// Consistency reads a [consistency].
func (d *Decoder) Consistency() Consistency { return Consistency(d.Short()) }

// AppendByte appends a [byte].
func AppendByte(b []byte, v byte) []byte { return append(b, v) }

// AppendShort appends a [short].
func AppendShort(b []byte, v uint16) []byte { return binary.BigEndian.AppendUint16(b, v) }

// AppendInt appends an [int].
func AppendInt(b []byte, v int32) []byte { return binary.BigEndian.AppendUint32(b, uint32(v)) }

// AppendLong appends a [long].
func AppendLong(b []byte, v int64) []byte { return binary.BigEndian.AppendUint64(b, uint64(v)) }

// AppendString appends a [string]. Strings longer than 65535 bytes are truncated.
func AppendString(b []byte, s string) []byte {
	if len(s) > math.MaxUint16 {
		s = s[:math.MaxUint16]
	}
	return append(AppendShort(b, uint16(len(s))), s...)
}

// AppendLongString appends a [long string].
func AppendLongString(b []byte, s string) []byte {
	return append(AppendInt(b, int32(len(s))), s...)
}

// AppendBytes appends [bytes]; a nil v is written as null (length -1).
func AppendBytes(b []byte, v []byte) []byte {
	if v == nil {
		return AppendInt(b, -1)
	}
	return append(AppendInt(b, int32(len(v))), v...)
}

// AppendShortBytes appends [short bytes].
func AppendShortBytes(b []byte, v []byte) []byte {
	return append(AppendShort(b, uint16(len(v))), v...)
}

// AppendUUID appends a [uuid].
func AppendUUID(b []byte, u [16]byte) []byte { return append(b, u[:]...) }

// AppendStringList appends a [string list].
func AppendStringList(b []byte, l []string) []byte {
	b = AppendShort(b, uint16(len(l)))
	for _, s := range l {
		b = AppendString(b, s)
	}
	return b
}

// AppendStringMap appends a [string map], in map order.
func AppendStringMap(b []byte, m map[string]string) []byte {
	b = AppendShort(b, uint16(len(m)))
	for k, v := range m {
		b = AppendString(AppendString(b, k), v)
	}
	return b
}

// AppendStringMultimap appends a [string multimap], its keys in order: a node answers
// every OPTIONS with the same bytes, as Cassandra and ScyllaDB do (a relay may then
// recognise the SUPPORTED it rewrote before, see sidecar's rewriteSupported).
func AppendStringMultimap(b []byte, m map[string][]string) []byte {
	b = AppendShort(b, uint16(len(m)))
	var small [16]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = AppendStringList(AppendString(b, k), m[k])
	}
	return b
}

// AppendBytesMap appends a [bytes map].
func AppendBytesMap(b []byte, m map[string][]byte) []byte {
	b = AppendShort(b, uint16(len(m)))
	for k, v := range m {
		b = AppendBytes(AppendString(b, k), v)
	}
	return b
}

// AppendInet appends an [inet].
func AppendInet(b []byte, ap netip.AddrPort) []byte {
	a := ap.Addr()
	if a.Is4() || a.Is4In6() {
		a4 := a.Unmap().As4()
		b = append(append(b, 4), a4[:]...)
	} else {
		a16 := a.As16()
		b = append(append(b, 16), a16[:]...)
	}
	return AppendInt(b, int32(ap.Port()))
}

// Consistency is a CQL consistency level.
type Consistency uint16

// Consistency levels.
const (
	Any         Consistency = 0x0000
	One         Consistency = 0x0001
	Two         Consistency = 0x0002
	Three       Consistency = 0x0003
	Quorum      Consistency = 0x0004
	All         Consistency = 0x0005
	LocalQuorum Consistency = 0x0006
	EachQuorum  Consistency = 0x0007
	Serial      Consistency = 0x0008
	LocalSerial Consistency = 0x0009
	LocalOne    Consistency = 0x000A
)

var consistencyNames = [...]string{"ANY", "ONE", "TWO", "THREE", "QUORUM", "ALL", "LOCAL_QUORUM",
	"EACH_QUORUM", "SERIAL", "LOCAL_SERIAL", "LOCAL_ONE"}

// String returns the level's name, such as "LOCAL_ONE".
func (c Consistency) String() string {
	if int(c) < len(consistencyNames) {
		return consistencyNames[c]
	}
	return "UNKNOWN"
}

// ParseConsistency returns the level named s (case-sensitive upper case, as printed by String).
func ParseConsistency(s string) (Consistency, bool) {
	for i, n := range consistencyNames {
		if n == s {
			return Consistency(i), true
		}
	}
	return 0, false
}
