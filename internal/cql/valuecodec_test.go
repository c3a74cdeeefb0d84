package cql

// This value codec (Go values to and from their CQL wire form) serves the tests only: it
// generates and checks the values that the protocol code carries as bytes. The node encodes
// and decodes values with its own codec (node/values.go), the one production codec.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"net/netip"
	"reflect"
	"time"
	"unicode/utf8"
)

// Decimal is a CQL decimal: Unscaled × 10^-Scale. A nil Unscaled is zero.
type Decimal struct {
	Unscaled *big.Int
	Scale    int32
}

// String returns the decimal in plain notation, such as "-12.340".
func (d Decimal) String() string {
	u := d.Unscaled
	if u == nil {
		u = new(big.Int)
	}
	if d.Scale <= 0 {
		s := u.String()
		if u.Sign() != 0 {
			for i := int32(0); i < -d.Scale; i++ {
				s += "0"
			}
		}
		return s
	}
	neg := u.Sign() < 0
	digits := new(big.Int).Abs(u).String()
	for int32(len(digits)) <= d.Scale {
		digits = "0" + digits
	}
	p := len(digits) - int(d.Scale)
	s := digits[:p] + "." + digits[p:]
	if neg {
		s = "-" + s
	}
	return s
}

// Duration is a CQL duration: months, days and nanoseconds, which all have the same sign.
type Duration struct {
	Months int32
	Days   int32
	Nanos  int64
}

// MapEntry is one entry of a CQL map, as returned by Unmarshal in wire order.
type MapEntry struct {
	Key, Value any
}

// ErrMarshal reports a Go value that cannot be encoded as the requested CQL type.
var ErrMarshal = errors.New("cql: cannot marshal value")

// maxValueDepth bounds the nesting of collections, tuples and UDTs in Marshal and Unmarshal.
const maxValueDepth = 32

func marshalErr(t TypeInfo, v any, why string) error {
	if why != "" {
		return fmt.Errorf("%w: %T as %s: %s", ErrMarshal, v, t, why)
	}
	return fmt.Errorf("%w: %T as %s", ErrMarshal, v, t)
}

// Marshal encodes v as a value of CQL type t, in the v3/v4 format (collections use [int]
// counts). A nil v, or a nil pointer, slice or map, gives nil, the null value. See the package
// documentation of Unmarshal for the Go type of each CQL type; Marshal accepts those types
// and also: any Go integer kind for bigint, counter, int, smallint, tinyint, varint,
// timestamp (ms) and date (raw days) when it fits; string for uuid, timeuuid, inet and blob;
// []byte for text, ascii and custom types; time.Time for date and time.Duration for time
// and duration; any slice for list, set and tuple, and any map for map and udt. Marshal is
// safe for concurrent use.
func Marshal(t TypeInfo, v any) ([]byte, error) { return marshal(t, v, 0) }

func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice:
		return rv.IsNil()
	}
	return false
}

// toInt64 converts any Go integer kind to int64.
func toInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint:
		return int64(x), uint64(x) <= math.MaxInt64
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint64:
		return int64(x), x <= math.MaxInt64
	case uintptr:
		return int64(x), uint64(x) <= math.MaxInt64
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		u := rv.Uint()
		return int64(u), u <= math.MaxInt64
	}
	return 0, false
}

func marshalInt(t TypeInfo, v any, min, max int64) (int64, error) {
	if p, ok := v.(*int64); ok {
		v = *p
	}
	n, ok := toInt64(v)
	if !ok {
		return 0, marshalErr(t, v, "")
	}
	if n < min || n > max {
		return 0, marshalErr(t, v, fmt.Sprintf("%d out of range", n))
	}
	return n, nil
}

func marshal(t TypeInfo, v any, depth int) ([]byte, error) {
	if isNil(v) {
		return nil, nil
	}
	if depth > maxValueDepth {
		return nil, marshalErr(t, v, "nested too deep")
	}
	switch t.ID {
	case TypeASCII, TypeVarchar:
		var s string
		switch x := v.(type) {
		case string:
			s = x
		case []byte:
			s = string(x)
		default:
			return nil, marshalErr(t, v, "")
		}
		if t.ID == TypeASCII {
			for i := 0; i < len(s); i++ {
				if s[i] >= 0x80 {
					return nil, marshalErr(t, v, "not ascii")
				}
			}
		} else if !utf8.ValidString(s) {
			return nil, marshalErr(t, v, "not utf-8")
		}
		return append([]byte{}, s...), nil
	case TypeBlob, TypeCustom:
		switch x := v.(type) {
		case []byte:
			return append([]byte{}, x...), nil
		case string:
			return []byte(x), nil
		}
		return nil, marshalErr(t, v, "")
	case TypeBigint, TypeCounter:
		n, err := marshalInt(t, v, math.MinInt64, math.MaxInt64)
		if err != nil {
			return nil, err
		}
		return binary.BigEndian.AppendUint64(nil, uint64(n)), nil
	case TypeInt:
		n, err := marshalInt(t, v, math.MinInt32, math.MaxInt32)
		if err != nil {
			return nil, err
		}
		return binary.BigEndian.AppendUint32(nil, uint32(n)), nil
	case TypeSmallint:
		n, err := marshalInt(t, v, math.MinInt16, math.MaxInt16)
		if err != nil {
			return nil, err
		}
		return binary.BigEndian.AppendUint16(nil, uint16(n)), nil
	case TypeTinyint:
		n, err := marshalInt(t, v, math.MinInt8, math.MaxInt8)
		if err != nil {
			return nil, err
		}
		return []byte{byte(n)}, nil
	case TypeBoolean:
		x, ok := v.(bool)
		if !ok {
			return nil, marshalErr(t, v, "")
		}
		if x {
			return []byte{1}, nil
		}
		return []byte{0}, nil
	case TypeDouble:
		var f float64
		switch x := v.(type) {
		case float64:
			f = x
		case float32:
			f = float64(x)
		default:
			return nil, marshalErr(t, v, "")
		}
		return binary.BigEndian.AppendUint64(nil, math.Float64bits(f)), nil
	case TypeFloat:
		var f float32
		switch x := v.(type) {
		case float32:
			f = x
		case float64:
			f = float32(x)
		default:
			return nil, marshalErr(t, v, "")
		}
		return binary.BigEndian.AppendUint32(nil, math.Float32bits(f)), nil
	case TypeTimestamp:
		var ms int64
		switch x := v.(type) {
		case time.Time:
			ms = x.UnixMilli()
		case *time.Time:
			ms = x.UnixMilli()
		default:
			n, ok := toInt64(v)
			if !ok {
				return nil, marshalErr(t, v, "")
			}
			ms = n
		}
		return binary.BigEndian.AppendUint64(nil, uint64(ms)), nil
	case TypeUUID, TypeTimeUUID:
		var u [16]byte
		switch x := v.(type) {
		case [16]byte:
			u = x
		case *[16]byte:
			u = *x
		case []byte:
			if len(x) != 16 {
				return nil, marshalErr(t, v, "not 16 bytes")
			}
			copy(u[:], x)
		case string:
			var err error
			if u, err = ParseUUID(x); err != nil {
				return nil, marshalErr(t, v, err.Error())
			}
		default:
			return nil, marshalErr(t, v, "")
		}
		if t.ID == TypeTimeUUID && u[6]>>4 != 1 {
			return nil, marshalErr(t, v, "not a version 1 uuid")
		}
		return u[:], nil
	case TypeVarint:
		switch x := v.(type) {
		case *big.Int:
			return appendVarint(nil, x), nil
		case big.Int:
			return appendVarint(nil, &x), nil
		}
		if n, ok := toInt64(v); ok {
			return appendVarintInt64(nil, n), nil
		}
		if u, ok := v.(uint64); ok {
			return appendVarint(nil, new(big.Int).SetUint64(u)), nil
		}
		return nil, marshalErr(t, v, "")
	case TypeDecimal:
		var d Decimal
		switch x := v.(type) {
		case Decimal:
			d = x
		case *Decimal:
			d = *x
		default:
			return nil, marshalErr(t, v, "")
		}
		b := binary.BigEndian.AppendUint32(nil, uint32(d.Scale))
		if d.Unscaled == nil {
			return append(b, 0), nil
		}
		return appendVarint(b, d.Unscaled), nil
	case TypeInet:
		var a netip.Addr
		switch x := v.(type) {
		case netip.Addr:
			a = x
		case string:
			var err error
			if a, err = netip.ParseAddr(x); err != nil {
				return nil, marshalErr(t, v, err.Error())
			}
		case []byte:
			var ok bool
			if a, ok = netip.AddrFromSlice(x); !ok {
				return nil, marshalErr(t, v, "not 4 or 16 bytes")
			}
		default:
			return nil, marshalErr(t, v, "")
		}
		if !a.IsValid() {
			return nil, marshalErr(t, v, "invalid address")
		}
		if a.Is4() {
			a4 := a.As4()
			return a4[:], nil
		}
		a16 := a.As16()
		return a16[:], nil
	case TypeDate:
		var days int64
		if x, ok := v.(time.Time); ok {
			d := x.Unix() / 86400
			if x.Unix() < 0 && x.Unix()%86400 != 0 {
				d--
			}
			days = d + 1<<31
		} else {
			n, err := marshalInt(t, v, 0, math.MaxUint32)
			if err != nil {
				return nil, err
			}
			days = n
		}
		if days < 0 || days > math.MaxUint32 {
			return nil, marshalErr(t, v, "out of range")
		}
		return binary.BigEndian.AppendUint32(nil, uint32(days)), nil
	case TypeTime:
		var ns int64
		if x, ok := v.(time.Duration); ok {
			ns = int64(x)
		} else {
			n, ok := toInt64(v)
			if !ok {
				return nil, marshalErr(t, v, "")
			}
			ns = n
		}
		if ns < 0 || ns >= 86400*int64(time.Second) {
			return nil, marshalErr(t, v, "not within a day")
		}
		return binary.BigEndian.AppendUint64(nil, uint64(ns)), nil
	case TypeDuration:
		var d Duration
		switch x := v.(type) {
		case Duration:
			d = x
		case *Duration:
			d = *x
		case time.Duration:
			d.Nanos = int64(x)
		default:
			return nil, marshalErr(t, v, "")
		}
		if (d.Months < 0 || d.Days < 0 || d.Nanos < 0) && (d.Months > 0 || d.Days > 0 || d.Nanos > 0) {
			return nil, marshalErr(t, v, "mixed signs")
		}
		b := appendVint(nil, int64(d.Months))
		b = appendVint(b, int64(d.Days))
		return appendVint(b, d.Nanos), nil
	case TypeList, TypeSet:
		if t.Elem == nil {
			return nil, marshalErr(t, v, "no element type")
		}
		elems, ok := sliceOf(v)
		if !ok {
			return nil, marshalErr(t, v, "")
		}
		b := binary.BigEndian.AppendUint32(nil, uint32(len(elems)))
		for _, e := range elems {
			eb, err := marshal(*t.Elem, e, depth+1)
			if err != nil {
				return nil, err
			}
			b = AppendBytes(b, eb)
		}
		return b, nil
	case TypeMap:
		if t.Elem == nil || t.Key == nil {
			return nil, marshalErr(t, v, "no key or value type")
		}
		entries, ok := entriesOf(v)
		if !ok {
			return nil, marshalErr(t, v, "")
		}
		b := binary.BigEndian.AppendUint32(nil, uint32(len(entries)))
		for _, e := range entries {
			kb, err := marshal(*t.Key, e.Key, depth+1)
			if err != nil {
				return nil, err
			}
			vb, err := marshal(*t.Elem, e.Value, depth+1)
			if err != nil {
				return nil, err
			}
			b = AppendBytes(AppendBytes(b, kb), vb)
		}
		return b, nil
	case TypeTuple:
		elems, ok := sliceOf(v)
		if !ok {
			return nil, marshalErr(t, v, "")
		}
		if len(elems) > len(t.Elems) {
			return nil, marshalErr(t, v, "too many elements")
		}
		b := []byte{}
		for i, e := range elems {
			eb, err := marshal(t.Elems[i], e, depth+1)
			if err != nil {
				return nil, err
			}
			b = AppendBytes(b, eb)
		}
		return b, nil
	case TypeUDT:
		fields, ok := v.(map[string]any)
		if !ok {
			return nil, marshalErr(t, v, "")
		}
	next:
		for name := range fields {
			for _, f := range t.Fields {
				if f.Name == name {
					continue next
				}
			}
			return nil, marshalErr(t, v, "unknown field "+name)
		}
		b := []byte{}
		for _, f := range t.Fields {
			fb, err := marshal(f.Type, fields[f.Name], depth+1)
			if err != nil {
				return nil, err
			}
			b = AppendBytes(b, fb)
		}
		return b, nil
	}
	return nil, marshalErr(t, v, "unknown type")
}

// sliceOf returns the elements of []any or of any other slice or array (but not []byte).
func sliceOf(v any) ([]any, bool) {
	if s, ok := v.([]any); ok {
		return s, true
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array {
		return nil, false
	}
	if rv.Type().Elem().Kind() == reflect.Uint8 {
		return nil, false
	}
	s := make([]any, rv.Len())
	for i := range s {
		s[i] = rv.Index(i).Interface()
	}
	return s, true
}

// entriesOf returns the entries of []MapEntry or of any Go map (in map order).
func entriesOf(v any) ([]MapEntry, bool) {
	if e, ok := v.([]MapEntry); ok {
		return e, true
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Map {
		return nil, false
	}
	e := make([]MapEntry, 0, rv.Len())
	it := rv.MapRange()
	for it.Next() {
		e = append(e, MapEntry{Key: it.Key().Interface(), Value: it.Value().Interface()})
	}
	return e, true
}

// appendVarintInt64 appends n as a minimal two's-complement big-endian integer.
func appendVarintInt64(b []byte, n int64) []byte {
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], uint64(n))
	i := 0
	for i < 7 && ((buf[i] == 0 && buf[i+1]&0x80 == 0) || (buf[i] == 0xff && buf[i+1]&0x80 != 0)) {
		i++
	}
	return append(b, buf[i:]...)
}

// appendVarint appends x as a minimal two's-complement big-endian integer.
func appendVarint(b []byte, x *big.Int) []byte {
	if x.IsInt64() {
		return appendVarintInt64(b, x.Int64())
	}
	if x.Sign() > 0 {
		mag := x.Bytes()
		if mag[0]&0x80 != 0 {
			b = append(b, 0)
		}
		return append(b, mag...)
	}
	// -x-1 is non-negative; its bytes inverted are x in two's complement.
	y := new(big.Int).Neg(x)
	y.Sub(y, big.NewInt(1))
	mag := y.Bytes()
	if len(mag) == 0 || mag[0]&0x80 != 0 {
		b = append(b, 0xff)
	}
	for _, c := range mag {
		b = append(b, ^c)
	}
	return b
}

// parseVarint decodes a two's-complement big-endian integer; b must not be empty.
func parseVarint(b []byte) *big.Int {
	if len(b) <= 8 {
		var n int64
		if b[0]&0x80 != 0 {
			n = -1
		}
		for _, c := range b {
			n = n<<8 | int64(c)
		}
		return big.NewInt(n)
	}
	x := new(big.Int).SetBytes(b)
	if b[0]&0x80 != 0 {
		x.Sub(x, new(big.Int).Lsh(big.NewInt(1), uint(len(b))*8))
	}
	return x
}

// appendVint appends n as Cassandra's zig-zag encoded variable-length integer.
func appendVint(b []byte, n int64) []byte {
	u := uint64(n>>63) ^ uint64(n<<1)
	size := (639 - bits.LeadingZeros64(u|1)*9) >> 6
	if size == 1 {
		return append(b, byte(u))
	}
	extra := size - 1
	start := len(b)
	for i := 0; i < size; i++ {
		b = append(b, 0)
	}
	for i := extra; i >= 0; i-- {
		b[start+i] = byte(u)
		u >>= 8
	}
	b[start] |= ^byte(0xff >> extra)
	return b
}

// readVint reads one vint from b and returns it and the number of bytes used, or n == 0
// when b is too short.
func readVint(b []byte) (v int64, n int) {
	if len(b) == 0 {
		return 0, 0
	}
	first := b[0]
	extra := bits.LeadingZeros8(^first)
	if len(b) < 1+extra {
		return 0, 0
	}
	u := uint64(first & (0xff >> extra))
	for i := 1; i <= extra; i++ {
		u = u<<8 | uint64(b[i])
	}
	return int64(u>>1) ^ -int64(u&1), 1 + extra
}

// ErrUnmarshal reports bytes that are not a valid value of the requested CQL type.
var ErrUnmarshal = errors.New("cql: cannot unmarshal value")

func unmarshalErr(t TypeInfo, why string) error {
	return fmt.Errorf("%w: %s: %s", ErrUnmarshal, t, why)
}

// Unmarshal decodes b, a value of CQL type t in the v3/v4 format, into its Go form:
//
//	ascii, text, varchar  string
//	bigint, counter       int64
//	blob, custom          []byte (a copy)
//	boolean               bool
//	decimal               Decimal
//	double                float64
//	float                 float32
//	int                   int32
//	timestamp             time.Time (UTC, millisecond precision)
//	uuid, timeuuid        [16]byte
//	varint                *big.Int
//	inet                  netip.Addr
//	date                  uint32 (days, with 2^31 the Unix epoch, as on the wire)
//	time                  int64 (nanoseconds since midnight)
//	smallint              int16
//	tinyint               int8
//	duration              Duration
//	list, set, tuple      []any
//	map                   []MapEntry (in wire order)
//	udt                   map[string]any
//
// A nil b is null and gives nil. An empty b gives nil too for types whose encoding cannot be
// empty (numbers, uuids, collections, …), and "" or an empty []byte for text and blob types.
// Null elements of collections, tuples and UDTs are nil. Unmarshal never panics, bounds
// nesting, and is safe for concurrent use. Results do not alias b.
func Unmarshal(t TypeInfo, b []byte) (any, error) { return unmarshal(t, b, 0) }

func unmarshal(t TypeInfo, b []byte, depth int) (any, error) {
	if b == nil {
		return nil, nil
	}
	if depth > maxValueDepth {
		return nil, unmarshalErr(t, "nested too deep")
	}
	switch t.ID {
	case TypeASCII, TypeVarchar:
		if t.ID == TypeASCII {
			for _, c := range b {
				if c >= 0x80 {
					return nil, unmarshalErr(t, "not ascii")
				}
			}
		} else if !utf8.Valid(b) {
			return nil, unmarshalErr(t, "not utf-8")
		}
		return string(b), nil
	case TypeBlob, TypeCustom:
		return append([]byte{}, b...), nil
	}
	if len(b) == 0 {
		return nil, nil
	}
	fixed := func(n int) error {
		if len(b) != n {
			return unmarshalErr(t, fmt.Sprintf("%d bytes, want %d", len(b), n))
		}
		return nil
	}
	switch t.ID {
	case TypeBigint, TypeCounter:
		if err := fixed(8); err != nil {
			return nil, err
		}
		return int64(binary.BigEndian.Uint64(b)), nil
	case TypeInt:
		if err := fixed(4); err != nil {
			return nil, err
		}
		return int32(binary.BigEndian.Uint32(b)), nil
	case TypeSmallint:
		if err := fixed(2); err != nil {
			return nil, err
		}
		return int16(binary.BigEndian.Uint16(b)), nil
	case TypeTinyint:
		if err := fixed(1); err != nil {
			return nil, err
		}
		return int8(b[0]), nil
	case TypeBoolean:
		if err := fixed(1); err != nil {
			return nil, err
		}
		return b[0] != 0, nil
	case TypeDouble:
		if err := fixed(8); err != nil {
			return nil, err
		}
		return math.Float64frombits(binary.BigEndian.Uint64(b)), nil
	case TypeFloat:
		if err := fixed(4); err != nil {
			return nil, err
		}
		return math.Float32frombits(binary.BigEndian.Uint32(b)), nil
	case TypeTimestamp:
		if err := fixed(8); err != nil {
			return nil, err
		}
		return time.UnixMilli(int64(binary.BigEndian.Uint64(b))).UTC(), nil
	case TypeUUID, TypeTimeUUID:
		if err := fixed(16); err != nil {
			return nil, err
		}
		if t.ID == TypeTimeUUID && b[6]>>4 != 1 {
			return nil, unmarshalErr(t, "not a version 1 uuid")
		}
		return [16]byte(b), nil
	case TypeVarint:
		return parseVarint(b), nil
	case TypeDecimal:
		if len(b) < 5 {
			return nil, unmarshalErr(t, "too short")
		}
		return Decimal{Scale: int32(binary.BigEndian.Uint32(b)), Unscaled: parseVarint(b[4:])}, nil
	case TypeInet:
		if len(b) != 4 && len(b) != 16 {
			return nil, unmarshalErr(t, fmt.Sprintf("%d bytes, want 4 or 16", len(b)))
		}
		a, _ := netip.AddrFromSlice(b)
		return a, nil
	case TypeDate:
		if err := fixed(4); err != nil {
			return nil, err
		}
		return binary.BigEndian.Uint32(b), nil
	case TypeTime:
		if err := fixed(8); err != nil {
			return nil, err
		}
		ns := int64(binary.BigEndian.Uint64(b))
		if ns < 0 || ns >= 86400*int64(time.Second) {
			return nil, unmarshalErr(t, "not within a day")
		}
		return ns, nil
	case TypeDuration:
		months, n1 := readVint(b)
		days, n2 := readVint(b[n1:])
		nanos, n3 := readVint(b[n1+n2:])
		if n1 == 0 || n2 == 0 || n3 == 0 || n1+n2+n3 != len(b) ||
			months != int64(int32(months)) || days != int64(int32(days)) {
			return nil, unmarshalErr(t, "bad vints")
		}
		if (months < 0 || days < 0 || nanos < 0) && (months > 0 || days > 0 || nanos > 0) {
			return nil, unmarshalErr(t, "mixed signs")
		}
		return Duration{Months: int32(months), Days: int32(days), Nanos: nanos}, nil
	case TypeList, TypeSet:
		if t.Elem == nil {
			return nil, unmarshalErr(t, "no element type")
		}
		d := Decoder{b: b}
		n := int(d.Int())
		if d.err != nil || n < 0 || int64(n)*4 > int64(len(d.b)) {
			return nil, unmarshalErr(t, "bad element count")
		}
		l := make([]any, n)
		for i := range l {
			eb := d.Bytes()
			if d.err != nil {
				return nil, unmarshalErr(t, "truncated")
			}
			e, err := unmarshal(*t.Elem, eb, depth+1)
			if err != nil {
				return nil, err
			}
			l[i] = e
		}
		if len(d.b) != 0 {
			return nil, unmarshalErr(t, "trailing bytes")
		}
		return l, nil
	case TypeMap:
		if t.Elem == nil || t.Key == nil {
			return nil, unmarshalErr(t, "no key or value type")
		}
		d := Decoder{b: b}
		n := int(d.Int())
		if d.err != nil || n < 0 || int64(n)*8 > int64(len(d.b)) {
			return nil, unmarshalErr(t, "bad entry count")
		}
		m := make([]MapEntry, n)
		for i := range m {
			kb, vb := d.Bytes(), d.Bytes()
			if d.err != nil {
				return nil, unmarshalErr(t, "truncated")
			}
			k, err := unmarshal(*t.Key, kb, depth+1)
			if err != nil {
				return nil, err
			}
			v, err := unmarshal(*t.Elem, vb, depth+1)
			if err != nil {
				return nil, err
			}
			m[i] = MapEntry{Key: k, Value: v}
		}
		if len(d.b) != 0 {
			return nil, unmarshalErr(t, "trailing bytes")
		}
		return m, nil
	case TypeTuple:
		d := Decoder{b: b}
		l := make([]any, 0, len(t.Elems))
		for _, et := range t.Elems {
			if len(d.b) == 0 {
				break
			}
			eb := d.Bytes()
			if d.err != nil {
				return nil, unmarshalErr(t, "truncated")
			}
			e, err := unmarshal(et, eb, depth+1)
			if err != nil {
				return nil, err
			}
			l = append(l, e)
		}
		if len(d.b) != 0 {
			return nil, unmarshalErr(t, "trailing bytes")
		}
		for len(l) < len(t.Elems) {
			l = append(l, nil)
		}
		return l, nil
	case TypeUDT:
		d := Decoder{b: b}
		m := make(map[string]any, len(t.Fields))
		for _, f := range t.Fields {
			if len(d.b) == 0 {
				// Fields added after the value was written are null.
				m[f.Name] = nil
				continue
			}
			fb := d.Bytes()
			if d.err != nil {
				return nil, unmarshalErr(t, "truncated")
			}
			v, err := unmarshal(f.Type, fb, depth+1)
			if err != nil {
				return nil, err
			}
			m[f.Name] = v
		}
		if len(d.b) != 0 {
			return nil, unmarshalErr(t, "trailing bytes")
		}
		return m, nil
	}
	return nil, unmarshalErr(t, "unknown type")
}
