package cqlvalue

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/hex"
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

// constError is Cassandra's message for a literal that does not fit its column.
func constError(t *grammar.Term, col string, typ cql.TypeInfo) *cql.Error {
	return Invalidf("Invalid %s constant (%s) for \"%s\" of type %s", grammar.LitNames[t.Lit], t.Text, col, typ.String())
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
	n := 4
	for _, e := range elems {
		n += 4 + len(e)
	}
	b := make([]byte, 0, n)
	b = binary.BigEndian.AppendUint32(b, uint32(len(elems)))
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
			et := ElemType(t)
			if t.ID == cql.TypeMap && i%2 == 0 {
				et = KeyType(t)
			}
			if e == nil {
				return Invalidf("null is not supported inside collections")
			}
			if err := Validate(et, e, col); err != nil {
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
	kt := ElemType(t)
	if t.ID == cql.TypeMap {
		kt = KeyType(t)
	}
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

// literal converts a constant term to the serialization of type typ, for column col.
// It returns nil for null.
func Literal(t *grammar.Term, typ cql.TypeInfo, col string) ([]byte, error) {
	return literalDepth(t, typ, col, 0)
}

func literalDepth(t *grammar.Term, typ cql.TypeInfo, col string, depth int) ([]byte, error) {
	if depth > grammar.MaxNesting {
		return nil, Invalidf("literal nesting too deep for %s", col)
	}
	switch t.Kind {
	case grammar.TermList, grammar.TermSet, grammar.TermMap:
		return collectionLiteral(t, typ, col, depth)
	case grammar.TermTuple:
		return tupleLiteral(t, typ, col, depth)
	case grammar.TermUDT:
		return udtLiteral(t, typ, col, depth)
	case grammar.TermFunc:
		return nil, Invalidf("function %s() is not supported here", t.Name)
	case grammar.TermBind:
		return nil, Invalidf("bind marker in a constant context for %s", col)
	}
	if t.Lit == grammar.LitNull {
		return nil, nil
	}
	bad := func() ([]byte, error) { return nil, constError(t, col, typ) }
	switch typ.ID {
	case cql.TypeASCII, cql.TypeVarchar:
		if t.Lit != grammar.LitString {
			return bad()
		}
		if typ.ID == cql.TypeASCII {
			for i := 0; i < len(t.Text); i++ {
				if t.Text[i] >= 0x80 {
					return nil, Invalidf("Invalid ASCII character in string literal for %s", col)
				}
			}
		}
		return []byte(t.Text), nil
	case cql.TypeBlob:
		if t.Lit != grammar.LitHex {
			return bad()
		}
		s := t.Text[2:]
		if len(s)%2 == 1 {
			return nil, Invalidf("Invalid HEX constant (%s) for \"%s\" of type blob: odd number of digits", t.Text, col)
		}
		b, err := hex.DecodeString(s)
		if err != nil {
			return bad()
		}
		if b == nil {
			b = []byte{}
		}
		return b, nil
	case cql.TypeBoolean:
		if t.Lit != grammar.LitBool {
			if t.Lit == grammar.LitString && (strings.EqualFold(t.Text, "true") || strings.EqualFold(t.Text, "false")) {
				return EncBool(strings.EqualFold(t.Text, "true")), nil
			}
			return bad()
		}
		return EncBool(t.Text == "true"), nil
	case cql.TypeTinyint, cql.TypeSmallint, cql.TypeInt, cql.TypeBigint, cql.TypeCounter:
		if t.Lit != grammar.LitInt {
			return bad()
		}
		bits := map[cql.TypeID]int{cql.TypeTinyint: 8, cql.TypeSmallint: 16, cql.TypeInt: 32, cql.TypeBigint: 64, cql.TypeCounter: 64}[typ.ID]
		v, err := strconv.ParseInt(t.Text, 10, bits)
		if err != nil {
			return nil, Invalidf("Invalid INTEGER constant (%s) for \"%s\" of type %s: out of range", t.Text, col, typ.String())
		}
		b := make([]byte, bits/8)
		for i := range b {
			b[len(b)-1-i] = byte(v >> (8 * i))
		}
		return b, nil
	case cql.TypeVarint:
		if t.Lit != grammar.LitInt {
			return bad()
		}
		n, ok := new(big.Int).SetString(t.Text, 10)
		if !ok {
			return bad()
		}
		return EncVarint(n), nil
	case cql.TypeFloat, cql.TypeDouble:
		if t.Lit != grammar.LitInt && t.Lit != grammar.LitFloat {
			return bad()
		}
		v, err := parseFloatLit(t.Text)
		if err != nil {
			return bad()
		}
		if typ.ID == cql.TypeFloat {
			return binary.BigEndian.AppendUint32(nil, math.Float32bits(float32(v))), nil
		}
		return EncDouble(v), nil
	case cql.TypeDecimal:
		if t.Lit != grammar.LitInt && t.Lit != grammar.LitFloat {
			return bad()
		}
		b, ok := EncDecimal(t.Text)
		if !ok {
			return bad()
		}
		return b, nil
	case cql.TypeCustom:
		// A custom type takes a blob constant; LexicalUUIDType a uuid too.
		if t.Lit == grammar.LitHex && len(t.Text)%2 == 0 {
			if b, err := hex.DecodeString(t.Text[2:]); err == nil {
				return append([]byte{}, b...), Validate(typ, b, col)
			}
		}
		if t.Lit != grammar.LitUUID || !isLexicalUUID(typ) {
			return bad()
		}
		return hex.DecodeString(strings.ReplaceAll(t.Text, "-", ""))
	case cql.TypeUUID, cql.TypeTimeUUID:
		if t.Lit != grammar.LitUUID {
			return bad()
		}
		u, err := hex.DecodeString(strings.ReplaceAll(t.Text, "-", ""))
		if err != nil || len(u) != 16 {
			return bad()
		}
		if typ.ID == cql.TypeTimeUUID && u[6]>>4 != 1 {
			return nil, Invalidf("Unsupported UUID version %d for timeuuid column %s", u[6]>>4, col)
		}
		return u, nil
	case cql.TypeInet:
		if t.Lit != grammar.LitString {
			return bad()
		}
		a, err := netip.ParseAddr(t.Text)
		if err != nil {
			return nil, Invalidf("Unable to make inet address from '%s'", t.Text)
		}
		return EncInet(a), nil
	case cql.TypeTimestamp:
		switch t.Lit {
		case grammar.LitInt:
			v, err := strconv.ParseInt(t.Text, 10, 64)
			if err != nil {
				return bad()
			}
			return EncBigint(v), nil
		case grammar.LitString:
			ms, ok := parseTimestamp(t.Text)
			if !ok {
				return nil, Invalidf("Unable to coerce '%s' to a formatted date (long)", t.Text)
			}
			return EncBigint(ms), nil
		}
		return bad()
	case cql.TypeDate:
		switch t.Lit {
		case grammar.LitInt:
			v, err := strconv.ParseUint(t.Text, 10, 32)
			if err != nil {
				return bad()
			}
			return EncInt(int32(uint32(v))), nil
		case grammar.LitString:
			d, err := time.Parse("2006-01-02", t.Text)
			if err != nil {
				if v, err := strconv.ParseUint(t.Text, 10, 32); err == nil {
					return EncInt(int32(uint32(v))), nil
				}
				return nil, Invalidf("Unable to coerce '%s' to a formatted date (long)", t.Text)
			}
			days := d.Unix() / 86400
			return EncInt(int32(uint32(days + 1<<31))), nil
		}
		return bad()
	case cql.TypeTime:
		switch t.Lit {
		case grammar.LitInt:
			v, err := strconv.ParseInt(t.Text, 10, 64)
			if err != nil || v < 0 || v >= 86400e9 {
				return bad()
			}
			return EncBigint(v), nil
		case grammar.LitString:
			ns, ok := parseTimeOfDay(t.Text)
			if !ok {
				return nil, Invalidf("Unable to coerce '%s' to a formatted time (long)", t.Text)
			}
			return EncBigint(ns), nil
		}
		return bad()
	case cql.TypeDuration:
		if t.Lit != grammar.LitDuration {
			return bad()
		}
		d, err := grammar.ParseDuration(t.Text)
		if err != nil {
			return nil, Invalidf("Unable to convert '%s' to a duration", t.Text)
		}
		if !d.SameSign() {
			return nil, Invalidf("The duration months, days and nanoseconds must be all of the same sign (%d, %d, %d)", d.Months, d.Days, d.Nanos)
		}
		return grammar.EncDuration(d), nil
	}
	return nil, Invalidf("type %s is not supported by the embedded node", typ.String())
}

func parseFloatLit(s string) (float64, error) {
	switch strings.ToLower(s) {
	case "nan", "-nan":
		return math.NaN(), nil
	case "infinity":
		return math.Inf(1), nil
	case "-infinity":
		return math.Inf(-1), nil
	}
	return strconv.ParseFloat(s, 64)
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

// parseTimestamp accepts the ISO 8601 forms Cassandra accepts and returns milliseconds
// since the epoch. A missing zone means UTC.
func parseTimestamp(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return v, true
	}
	s = strings.Replace(s, "T", " ", 1)
	// Normalize the zone: "Z", "+hhmm", "+hh:mm", "+hh", or none.
	zone := "+00:00"
	body := s
	if strings.HasSuffix(body, "Z") || strings.HasSuffix(body, "z") {
		body = body[:len(body)-1]
	} else if i := strings.LastIndexAny(body, "+-"); i > 10 {
		z := body[i:]
		body = strings.TrimSpace(body[:i])
		switch len(z) {
		case 3:
			zone = z + ":00"
		case 5:
			zone = z[:3] + ":" + z[3:]
		case 6:
			zone = z
		default:
			return 0, false
		}
	}
	body = strings.TrimSpace(body)
	layouts := []string{"2006-01-02 15:04:05.999999999", "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02"}
	for _, l := range layouts {
		if t, err := time.Parse(l+"Z07:00", body+zone); err == nil {
			return t.UnixMilli(), true
		}
	}
	return 0, false
}

// parseTimeOfDay parses hh:mm:ss[.fffffffff] into nanoseconds since midnight.
func parseTimeOfDay(s string) (int64, bool) {
	parts := strings.SplitN(s, ".", 2)
	hms := strings.Split(parts[0], ":")
	if len(hms) != 3 {
		return 0, false
	}
	var v [3]int64
	for i, p := range hms {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n < 0 {
			return 0, false
		}
		v[i] = n
	}
	if v[0] > 23 || v[1] > 59 || v[2] > 59 {
		return 0, false
	}
	ns := ((v[0]*60+v[1])*60 + v[2]) * 1e9
	if len(parts) == 2 {
		f := parts[1]
		if len(f) == 0 || len(f) > 9 {
			return 0, false
		}
		n, err := strconv.ParseInt(f+strings.Repeat("0", 9-len(f)), 10, 64)
		if err != nil || n < 0 {
			return 0, false
		}
		ns += n
	}
	return ns, true
}

func collectionLiteral(t *grammar.Term, typ cql.TypeInfo, col string, depth int) ([]byte, error) {
	switch typ.ID {
	case cql.TypeList:
		if t.Kind != grammar.TermList {
			return nil, Invalidf("Invalid %s literal for %s of type %s", KindName(t), col, typ.String())
		}
	case cql.TypeSet:
		if t.Kind != grammar.TermSet && !(t.Kind == grammar.TermMap && len(t.Elems) == 0) {
			return nil, Invalidf("Invalid %s literal for %s of type %s", KindName(t), col, typ.String())
		}
	case cql.TypeMap:
		if t.Kind != grammar.TermMap {
			return nil, Invalidf("Invalid %s literal for %s of type %s", KindName(t), col, typ.String())
		}
	default:
		return nil, Invalidf("Invalid %s literal for %s of type %s", KindName(t), col, typ.String())
	}
	var elems [][]byte
	for i, e := range t.Elems {
		et := ElemType(typ)
		if typ.ID == cql.TypeMap {
			et = KeyType(typ)
		}
		b, err := literalDepth(e, et, col, depth+1)
		if err != nil {
			return nil, err
		}
		if b == nil {
			return nil, Invalidf("null is not supported inside collections")
		}
		elems = append(elems, b)
		if typ.ID == cql.TypeMap {
			v, err := literalDepth(t.Vals[i], ElemType(typ), col, depth+1)
			if err != nil {
				return nil, err
			}
			if v == nil {
				return nil, Invalidf("null is not supported inside collections")
			}
			elems = append(elems, v)
		}
	}
	b := EncCollection(elems)
	binary.BigEndian.PutUint32(b, uint32(len(elems)/ElemsPerEntry(typ)))
	return NormalizeCollection(typ, b), nil
}

func KindName(t *grammar.Term) string {
	switch t.Kind {
	case grammar.TermList:
		return "list"
	case grammar.TermSet:
		return "set"
	case grammar.TermMap:
		return "map"
	}
	return "value"
}

// encTuple serializes the components of a tuple or user type value; nil is null.
func EncTuple(elems [][]byte) []byte {
	n := 0
	for _, e := range elems {
		n += 4 + len(e)
	}
	b := make([]byte, 0, n)
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

// tupleLiteral converts (a, b, ...) for a tuple type.
func tupleLiteral(t *grammar.Term, typ cql.TypeInfo, col string, depth int) ([]byte, error) {
	if typ.ID != cql.TypeTuple {
		return nil, Invalidf("Invalid tuple type literal for %s of type %s", col, CqlTypeText(typ))
	}
	if len(t.Elems) > len(typ.Elems) {
		return nil, Invalidf("Invalid tuple literal for %s: too many elements. Type %s expects %d but got %d", col, CqlTypeText(typ), len(typ.Elems), len(t.Elems))
	}
	elems := make([][]byte, len(typ.Elems))
	for i, e := range t.Elems {
		b, err := literalDepth(e, typ.Elems[i], col, depth+1)
		if err != nil {
			return nil, Invalidf("Invalid tuple literal for %s: component %d is not of type %s", col, i, CqlTypeText(typ.Elems[i]))
		}
		elems[i] = b
	}
	return EncTuple(elems), nil
}

// udtLiteral converts {field: value, ...} for a user type; fields not given are null.
func udtLiteral(t *grammar.Term, typ cql.TypeInfo, col string, depth int) ([]byte, error) {
	if typ.ID != cql.TypeUDT {
		return nil, Invalidf("Invalid user type literal for %s of type %s", col, CqlTypeText(typ))
	}
	elems := make([][]byte, len(typ.Fields))
	for i, n := range t.Names {
		f := slices.IndexFunc(typ.Fields, func(f cql.Field) bool { return f.Name == n })
		if f < 0 {
			return nil, Invalidf("Unknown field '%s' in value of user defined type %s", n, typ.Name)
		}
		b, err := literalDepth(t.Elems[i], typ.Fields[f].Type, col, depth+1)
		if err != nil {
			return nil, Invalidf("Invalid user type literal for %s: field %s is not of type %s", col, n, CqlTypeText(typ.Fields[f].Type))
		}
		elems[f] = b
	}
	return EncTuple(elems), nil
}

// compareValues orders two serialized values of type t as Cassandra's comparators do.
// Empty values sort first.
func CompareValues(t cql.TypeInfo, a, b []byte) int {
	if len(a) == 0 || len(b) == 0 {
		return cmp.Compare(len(a), len(b))
	}
	switch t.ID {
	case cql.TypeTinyint, cql.TypeSmallint, cql.TypeInt, cql.TypeBigint, cql.TypeCounter, cql.TypeTimestamp, cql.TypeTime:
		if len(a) == len(b) {
			if (a[0]^b[0])&0x80 != 0 {
				// Different signs: the negative one is smaller.
				if a[0]&0x80 != 0 {
					return -1
				}
				return 1
			}
			return bytes.Compare(a, b)
		}
		return DecVarint(a).Cmp(DecVarint(b))
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
			if c := cmp.Compare(uuidTime(a), uuidTime(b)); c != 0 {
				return c
			}
			return cmpSignedBytes(a[8:], b[8:])
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
			va, vb := a[6]>>4, b[6]>>4
			if va != vb {
				return cmp.Compare(int(va), int(vb))
			}
			if va == 1 {
				if c := cmp.Compare(uuidTime(a), uuidTime(b)); c != 0 {
					return c
				}
				return cmpSignedBytes(a[8:], b[8:])
			}
			return bytes.Compare(a, b)
		}
	case cql.TypeUDT, cql.TypeTuple:
		ea, oka := DecTuple(a)
		eb, okb := DecTuple(b)
		if oka && okb {
			types := ComponentTypes(t)
			for i := 0; i < len(ea) && i < len(eb) && i < len(types); i++ {
				switch {
				case ea[i] == nil && eb[i] == nil:
				case ea[i] == nil:
					return -1
				case eb[i] == nil:
					return 1
				default:
					if c := CompareValues(types[i], ea[i], eb[i]); c != 0 {
						return c
					}
				}
			}
			return cmp.Compare(len(ea), len(eb))
		}
	case cql.TypeList, cql.TypeSet, cql.TypeMap:
		per := ElemsPerEntry(t)
		ea, oka := DecCollection(a, per)
		eb, okb := DecCollection(b, per)
		if oka && okb {
			for i := 0; i < len(ea) && i < len(eb); i++ {
				et := ElemType(t)
				if t.ID == cql.TypeMap && i%2 == 0 {
					et = KeyType(t)
				}
				if c := CompareValues(et, ea[i], eb[i]); c != 0 {
					return c
				}
			}
			return cmp.Compare(len(ea), len(eb))
		}
	}
	return bytes.Compare(a, b)
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
