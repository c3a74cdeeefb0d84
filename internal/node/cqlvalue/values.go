package cqlvalue

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/grammar"
)

// Values are kept as their protocol serialization. This file turns CQL literals into that
// form, validates bound values, and orders serialized values as Cassandra does.

func Invalidf(format string, args ...any) *cql.Error {
	return &cql.Error{Code: cql.ErrCodeInvalid, Message: fmt.Sprintf(format, args...)}
}

func EncInt(v int32) []byte     { return binary.BigEndian.AppendUint32(nil, uint32(v)) }
func EncBigint(v int64) []byte  { return binary.BigEndian.AppendUint64(nil, uint64(v)) }
func EncText(s string) []byte   { return []byte(s) }
func EncUUID(u [16]byte) []byte { return slices.Clone(u[:]) }
func EncBool(v bool) []byte {
	if v {
		return []byte{1}
	}
	return []byte{0}
}
func EncDouble(v float64) []byte { return EncBigint(int64(math.Float64bits(v))) }

// encInet serializes an inet, nil for the zero address.
func EncInet(a netip.Addr) []byte {
	if !a.IsValid() {
		return nil
	}
	return AppendInet(nil, a)
}

// appendInet appends a's bytes: 4 for an IPv4 address (also one mapped into IPv6), else 16.
func AppendInet(b []byte, a netip.Addr) []byte {
	if a = a.Unmap(); a.Is4() {
		v := a.As4()
		return append(b, v[:]...)
	}
	v := a.As16()
	return append(b, v[:]...)
}

func EncTimestamp(t time.Time) []byte { return EncBigint(t.UnixMilli()) }

// encCollection serializes elements that are already serialized (protocol v3+ layout).
func EncCollection(elems [][]byte) []byte {
	b := make([]byte, 0, 4+elemsSize(elems))
	b = binary.BigEndian.AppendUint32(b, uint32(len(elems)))
	return appendElems(b, elems)
}

// elemsSize is the size of elems serialized by appendElems.
func elemsSize(elems [][]byte) int {
	n := 0
	for _, e := range elems {
		n += 4 + len(e)
	}
	return n
}

// appendElems appends each element as a [bytes] of the protocol: its length, then its
// bytes; nil is null, length -1. nextBytes reads them back.
func appendElems(b []byte, elems [][]byte) []byte {
	for _, e := range elems {
		if e == nil {
			b = binary.BigEndian.AppendUint32(b, 0xFFFFFFFF)
			continue
		}
		b = binary.BigEndian.AppendUint32(b, uint32(len(e)))
		b = append(b, e...)
	}
	return b
}

func EncTextList(l []string) []byte {
	elems := make([][]byte, len(l))
	for i, s := range l {
		elems[i] = []byte(s)
	}
	return EncCollection(elems)
}

// encTextSet serializes a set<text>, sorted.
func EncTextSet(l []string) []byte {
	s := slices.Clone(l)
	slices.Sort(s)
	s = slices.Compact(s)
	return EncTextList(s)
}

// encTextMap serializes a map<text, text>, sorted by key.
func EncTextMap(m map[string]string) []byte { return AppendTextMap(nil, m) }

// appendTextMap appends encTextMap's value.
func AppendTextMap(b []byte, m map[string]string) []byte {
	var few [4]string
	keys := few[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = binary.BigEndian.AppendUint32(b, uint32(len(keys)))
	for _, k := range keys {
		b = binary.BigEndian.AppendUint32(b, uint32(len(k)))
		b = append(b, k...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(m[k])))
		b = append(b, m[k]...)
	}
	return b
}

// encBlobMap serializes a map<text, blob>, sorted by key.
func EncBlobMap(m map[string][]byte) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	elems := make([][]byte, 0, 2*len(keys))
	for _, k := range keys {
		elems = append(elems, []byte(k), m[k])
	}
	b := EncCollection(elems)
	binary.BigEndian.PutUint32(b, uint32(len(keys)))
	return b
}

// decCollection splits a serialized collection into its elements (2 per map entry).
func DecCollection(b []byte, perEntry int) ([][]byte, bool) {
	if len(b) < 4 {
		return nil, len(b) == 0
	}
	n := int(binary.BigEndian.Uint32(b))
	b = b[4:]
	if n < 0 || n > len(b)/4/perEntry+1 {
		return nil, false
	}
	out := make([][]byte, 0, n*perEntry)
	for i := 0; i < n*perEntry; i++ {
		v, rest, ok := nextBytes(b)
		if !ok {
			return nil, false
		}
		out, b = append(out, v), rest
	}
	if len(b) != 0 {
		return nil, false
	}
	return out, true
}

// elemsPerEntry is 2 for maps, 1 for lists and sets.
func ElemsPerEntry(t cql.TypeInfo) int {
	if t.ID == cql.TypeMap {
		return 2
	}
	return 1
}

func IsCollection(t cql.TypeInfo) bool {
	return t.ID == cql.TypeList || t.ID == cql.TypeSet || t.ID == cql.TypeMap
}

func ElemType(t cql.TypeInfo) cql.TypeInfo {
	if t.Elem == nil {
		return cql.TypeInfo{ID: cql.TypeBlob}
	}
	return *t.Elem
}

func KeyType(t cql.TypeInfo) cql.TypeInfo {
	if t.Key == nil {
		return cql.TypeInfo{ID: cql.TypeBlob}
	}
	return *t.Key
}

// entryType is the type of element i of a serialized collection of type t: a map's keys
// and values alternate.
func entryType(t cql.TypeInfo, i int) cql.TypeInfo {
	if t.ID == cql.TypeMap && i%2 == 0 {
		return KeyType(t)
	}
	return ElemType(t)
}

// fixedSize is the serialized size of fixed-width types, or -1.
func FixedSize(id cql.TypeID) int {
	switch id {
	case cql.TypeBoolean, cql.TypeTinyint:
		if id == cql.TypeBoolean {
			return 1
		}
		return 1
	case cql.TypeSmallint:
		return 2
	case cql.TypeInt, cql.TypeFloat, cql.TypeDate:
		return 4
	case cql.TypeBigint, cql.TypeCounter, cql.TypeDouble, cql.TypeTimestamp, cql.TypeTime:
		return 8
	case cql.TypeUUID, cql.TypeTimeUUID:
		return 16
	}
	return -1
}

// validate checks a bound value against its column type, as Cassandra does before a write.
// An empty value is accepted for every type, like Cassandra's "empty" values.
func Validate(t cql.TypeInfo, b []byte, col string) error {
	if len(b) == 0 {
		return nil
	}
	if n := FixedSize(t.ID); n > 0 && len(b) != n {
		return Invalidf("Expected %d or 0 byte %s for %s (%d)", n, t.String(), col, len(b))
	}
	switch t.ID {
	case cql.TypeCustom:
		if isLexicalUUID(t) && len(b) != 16 {
			return Invalidf("Expected 16 or 0 byte uuid for %s (%d)", col, len(b))
		}
	case cql.TypeASCII:
		for _, c := range b {
			if c >= 0x80 {
				return Invalidf("Invalid byte for ascii: %d", c)
			}
		}
	case cql.TypeVarchar:
		if !utf8.Valid(b) {
			return Invalidf("Invalid UTF-8 bytes for %s", col)
		}
	case cql.TypeInet:
		if len(b) != 4 && len(b) != 16 {
			return Invalidf("Invalid inet value for %s: %d bytes", col, len(b))
		}
	case cql.TypeTimeUUID:
		if b[6]>>4 != 1 {
			return Invalidf("Unsupported UUID version %d for timeuuid column %s", b[6]>>4, col)
		}
	case cql.TypeDecimal:
		if len(b) < 4 {
			return Invalidf("Invalid decimal value for %s", col)
		}
	case cql.TypeDuration:
		d, ok := grammar.DecDuration(b)
		if !ok {
			return Invalidf("Invalid duration value for %s", col)
		}
		if !d.SameSign() {
			return Invalidf("The duration months, days and nanoseconds must be all of the same sign (%d, %d, %d)", d.Months, d.Days, d.Nanos)
		}
	case cql.TypeUDT, cql.TypeTuple:
		elems, ok := DecTuple(b)
		types := ComponentTypes(t)
		if !ok || len(elems) > len(types) {
			return Invalidf("Invalid %s value for %s: it has more components than its type, or is malformed", CqlTypeText(t), col)
		}
		for i, e := range elems {
			if e != nil {
				if err := Validate(types[i], e, col); err != nil {
					return err
				}
			}
		}
	case cql.TypeList, cql.TypeSet, cql.TypeMap:
		elems, ok := DecCollection(b, ElemsPerEntry(t))
		if !ok {
			return Invalidf("Invalid %s value for %s: malformed collection", t.String(), col)
		}
		for i, e := range elems {
			if e == nil {
				return Invalidf("null is not supported inside collections")
			}
			if err := Validate(entryType(t, i), e, col); err != nil {
				return err
			}
		}
	}
	return nil
}

// normalizeCollection sorts and deduplicates set elements and map keys, since drivers may
// bind them in any order.
func NormalizeCollection(t cql.TypeInfo, b []byte) []byte {
	if (t.ID != cql.TypeSet && t.ID != cql.TypeMap) || len(b) == 0 {
		return b
	}
	per := ElemsPerEntry(t)
	elems, ok := DecCollection(b, per)
	if !ok {
		return b
	}
	n := len(elems) / per
	kt := entryType(t, 0)
	sorted := true
	for i := 1; i < n; i++ {
		if CompareValues(kt, elems[(i-1)*per], elems[i*per]) >= 0 {
			sorted = false
			break
		}
	}
	if sorted {
		return b
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, c int) int { return CompareValues(kt, elems[a*per], elems[c*per]) })
	out := make([][]byte, 0, len(elems))
	for j, i := range idx {
		// Keep the last binding of a duplicated key.
		if j+1 < len(idx) && CompareValues(kt, elems[i*per], elems[idx[j+1]*per]) == 0 {
			continue
		}
		out = append(out, elems[i*per:i*per+per]...)
	}
	r := EncCollection(out)
	binary.BigEndian.PutUint32(r, uint32(len(out)/per))
	return r
}

// encVarint encodes n in minimal big-endian two's complement.
func EncVarint(n *big.Int) []byte {
	if n.Sign() == 0 {
		return []byte{0}
	}
	if n.Sign() > 0 {
		b := n.Bytes()
		if b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
		return b
	}
	// Two's complement of a negative number: 2^(8k) + n for the smallest k that fits.
	l := len(n.Bytes()) + 1
	m := new(big.Int).Lsh(big.NewInt(1), uint(8*l))
	m.Add(m, n)
	b := m.Bytes()
	for len(b) < l {
		b = append([]byte{0xFF}, b...)
	}
	for len(b) > 1 && b[0] == 0xFF && b[1]&0x80 != 0 {
		b = b[1:]
	}
	return b
}

func DecVarint(b []byte) *big.Int {
	n := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	return n
}

// encDecimal encodes a decimal literal as an int scale and a varint unscaled value.
func EncDecimal(s string) ([]byte, bool) {
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(s[i+1:])
		if err != nil {
			return nil, false
		}
		mant, exp = s[:i], e
	}
	scale := 0
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		scale = len(mant) - i - 1
		mant = mant[:i] + mant[i+1:]
	}
	n, ok := new(big.Int).SetString(mant, 10)
	if !ok {
		return nil, false
	}
	scale -= exp
	return append(EncInt(int32(scale)), EncVarint(n)...), true
}

// compareDecimal compares two decimals without materializing 10^scale for hostile scales:
// values of different orders of magnitude are ordered by magnitude first.
func compareDecimal(a, b []byte) int {
	if len(a) < 4 || len(b) < 4 {
		return bytes.Compare(a, b)
	}
	ua, ub := DecVarint(a[4:]), DecVarint(b[4:])
	sa, sb := int64(int32(binary.BigEndian.Uint32(a))), int64(int32(binary.BigEndian.Uint32(b)))
	if ua.Sign() != ub.Sign() || ua.Sign() == 0 {
		return cmp.Compare(ua.Sign(), ub.Sign())
	}
	magA := int64(len(new(big.Int).Abs(ua).String())) - sa
	magB := int64(len(new(big.Int).Abs(ub).String())) - sb
	if magA != magB {
		c := cmp.Compare(int(max(min(magA-magB, 1), -1)), 0)
		return c * ua.Sign()
	}
	// Same magnitude: the scales differ by at most the digit counts, so scaling is cheap.
	d := sa - sb
	if d > 0 {
		ub = new(big.Int).Mul(ub, new(big.Int).Exp(big.NewInt(10), big.NewInt(d), nil))
	} else if d < 0 {
		ua = new(big.Int).Mul(ua, new(big.Int).Exp(big.NewInt(10), big.NewInt(-d), nil))
	}
	return ua.Cmp(ub)
}

// encTuple serializes the components of a tuple or user type value; nil is null.
func EncTuple(elems [][]byte) []byte {
	return appendElems(make([]byte, 0, elemsSize(elems)), elems)
}

// nextBytes reads one [bytes] of the protocol from b: a length, then as many bytes (a
// negative length is null: v is nil); rest is what follows, ok false when b is too short.
func nextBytes(b []byte) (v, rest []byte, ok bool) {
	if len(b) < 4 {
		return nil, nil, false
	}
	l := int32(binary.BigEndian.Uint32(b))
	b = b[4:]
	if l < 0 {
		return nil, b, true
	}
	if int(l) > len(b) {
		return nil, nil, false
	}
	return b[:l:l], b[l:], true
}

// decTuple splits a tuple or user type value into its components, nil for null. A value
// may have fewer components than its type (a user type that gained fields since).
func DecTuple(b []byte) ([][]byte, bool) {
	var out [][]byte
	for len(b) > 0 {
		v, rest, ok := nextBytes(b)
		if !ok {
			return nil, false
		}
		out, b = append(out, v), rest
	}
	return out, true
}

// cqlTypeText spells a type as Cassandra's messages do: user types and tuples frozen.
func CqlTypeText(t cql.TypeInfo) string {
	switch t.ID {
	case cql.TypeUDT:
		return "frozen<" + QuoteName(t.Name) + ">"
	case cql.TypeTuple:
		parts := make([]string, len(t.Elems))
		for i, e := range t.Elems {
			parts[i] = CqlTypeText(e)
		}
		return "frozen<tuple<" + strings.Join(parts, ", ") + ">>"
	}
	return t.String()
}

// compareValues orders two serialized values of type t as Cassandra's comparators do.
// Empty values sort first.
func CompareValues(t cql.TypeInfo, a, b []byte) int {
	if len(a) == 0 || len(b) == 0 {
		return cmp.Compare(len(a), len(b))
	}
	switch t.ID {
	case cql.TypeTinyint, cql.TypeSmallint, cql.TypeInt, cql.TypeBigint, cql.TypeCounter, cql.TypeTimestamp, cql.TypeTime:
		return compareIntegers(a, b)
	case cql.TypeVarint:
		return DecVarint(a).Cmp(DecVarint(b))
	case cql.TypeDecimal:
		return compareDecimal(a, b)
	case cql.TypeFloat:
		if len(a) == 4 && len(b) == 4 {
			return cmpFloat(float64(math.Float32frombits(binary.BigEndian.Uint32(a))), float64(math.Float32frombits(binary.BigEndian.Uint32(b))))
		}
	case cql.TypeDouble:
		if len(a) == 8 && len(b) == 8 {
			return cmpFloat(math.Float64frombits(binary.BigEndian.Uint64(a)), math.Float64frombits(binary.BigEndian.Uint64(b)))
		}
	case cql.TypeTimeUUID:
		if len(a) == 16 && len(b) == 16 {
			return compareTimeUUIDs(a, b)
		}
	case cql.TypeCustom:
		if isLexicalUUID(t) && len(a) == 16 && len(b) == 16 {
			// java.util.UUID.compareTo: the two halves as signed longs.
			if c := cmp.Compare(int64(binary.BigEndian.Uint64(a)), int64(binary.BigEndian.Uint64(b))); c != 0 {
				return c
			}
			return cmp.Compare(int64(binary.BigEndian.Uint64(a[8:])), int64(binary.BigEndian.Uint64(b[8:])))
		}
	case cql.TypeUUID:
		if len(a) == 16 && len(b) == 16 {
			return compareUUIDs(a, b)
		}
	case cql.TypeUDT, cql.TypeTuple:
		if c, ok := compareComponents(t, a, b); ok {
			return c
		}
	case cql.TypeList, cql.TypeSet, cql.TypeMap:
		if c, ok := compareCollections(t, a, b); ok {
			return c
		}
	}
	return bytes.Compare(a, b)
}

// compareIntegers orders two big-endian two's complement integers: of one width by their
// bytes, of different widths as varints.
func compareIntegers(a, b []byte) int {
	if len(a) != len(b) {
		return DecVarint(a).Cmp(DecVarint(b))
	}
	if (a[0]^b[0])&0x80 != 0 {
		// Different signs: the negative one is smaller.
		if a[0]&0x80 != 0 {
			return -1
		}
		return 1
	}
	return bytes.Compare(a, b)
}

// compareTimeUUIDs orders two version 1 UUIDs of 16 bytes by their time, then by their
// clock sequence and node as signed bytes, as Cassandra's TimeUUIDType.
func compareTimeUUIDs(a, b []byte) int {
	if c := cmp.Compare(uuidTime(a), uuidTime(b)); c != 0 {
		return c
	}
	return cmpSignedBytes(a[8:], b[8:])
}

// compareUUIDs orders two UUIDs of 16 bytes as Cassandra's UUIDType: by version, then
// version 1 ones by time, others by their bytes.
func compareUUIDs(a, b []byte) int {
	va, vb := a[6]>>4, b[6]>>4
	if va != vb {
		return cmp.Compare(int(va), int(vb))
	}
	if va == 1 {
		return compareTimeUUIDs(a, b)
	}
	return bytes.Compare(a, b)
}

// compareComponents orders two tuple or user type values of type t component by
// component, null first, then by their number of components; ok is false when either is
// malformed.
func compareComponents(t cql.TypeInfo, a, b []byte) (c int, ok bool) {
	ea, oka := DecTuple(a)
	eb, okb := DecTuple(b)
	if !oka || !okb {
		return 0, false
	}
	types := ComponentTypes(t)
	for i := 0; i < len(ea) && i < len(eb) && i < len(types); i++ {
		switch {
		case ea[i] == nil && eb[i] == nil:
		case ea[i] == nil:
			return -1, true
		case eb[i] == nil:
			return 1, true
		default:
			if c := CompareValues(types[i], ea[i], eb[i]); c != 0 {
				return c, true
			}
		}
	}
	return cmp.Compare(len(ea), len(eb)), true
}

// compareCollections orders two collection values of type t element by element (a map's
// keys and values in turn), then by their number of elements; ok is false when either is
// malformed.
func compareCollections(t cql.TypeInfo, a, b []byte) (c int, ok bool) {
	per := ElemsPerEntry(t)
	ea, oka := DecCollection(a, per)
	eb, okb := DecCollection(b, per)
	if !oka || !okb {
		return 0, false
	}
	for i := 0; i < len(ea) && i < len(eb); i++ {
		if c := CompareValues(entryType(t, i), ea[i], eb[i]); c != 0 {
			return c, true
		}
	}
	return cmp.Compare(len(ea), len(eb)), true
}

func uuidTime(u []byte) uint64 {
	hi := uint64(binary.BigEndian.Uint16(u[6:8]) & 0x0FFF)
	mid := uint64(binary.BigEndian.Uint16(u[4:6]))
	lo := uint64(binary.BigEndian.Uint32(u[0:4]))
	return hi<<48 | mid<<32 | lo
}

func cmpSignedBytes(a, b []byte) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return cmp.Compare(int(int8(a[i])), int(int8(b[i])))
		}
	}
	return cmp.Compare(len(a), len(b))
}

func cmpFloat(a, b float64) int {
	// Java's Double.compare: NaN is greatest, -0 < +0.
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	an, bn := math.IsNaN(a), math.IsNaN(b)
	switch {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	}
	sa, sb := math.Signbit(a), math.Signbit(b)
	switch {
	case sa && !sb:
		return -1
	case !sa && sb:
		return 1
	}
	return 0
}

// int32Value decodes a bound or literal int used for TTL, LIMIT and such.
func Int32Value(b []byte) (int32, bool) {
	if len(b) != 4 {
		return 0, false
	}
	return int32(binary.BigEndian.Uint32(b)), true
}

func Int64Value(b []byte) (int64, bool) {
	if len(b) != 8 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(b)), true
}

// isLexicalUUID reports whether t is the custom type LexicalUUIDType.
func isLexicalUUID(t cql.TypeInfo) bool {
	return t.ID == cql.TypeCustom && t.Custom == grammar.MarshalPackage+"LexicalUUIDType"
}
