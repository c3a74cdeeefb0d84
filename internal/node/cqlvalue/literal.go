package cqlvalue

import (
	"encoding/binary"
	"encoding/hex"
	"math"
	"math/big"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/grammar"
)

// CQL literals turned into their protocol serialization, as Cassandra's types' fromString
// and its collection, tuple and user type literals: a constant by the type of the column
// it is for, a literal of several by its elements.

// constError is Cassandra's message for a literal that does not fit its column.
func constError(t *grammar.Term, col string, typ cql.TypeInfo) *cql.Error {
	return Invalidf("Invalid %s constant (%s) for \"%s\" of type %s", grammar.LitNames[t.Lit], t.Text, col, typ.String())
}

// literal converts a constant term to the serialization of type typ, for column col.
// It returns nil for null.
func Literal(t *grammar.Term, typ cql.TypeInfo, col string) ([]byte, error) {
	return literalDepth(t, typ, col, 0)
}

// literalDepth converts term t, at nesting depth, which is bounded, to the serialization
// of type typ, for column col: a collection, tuple or user type literal by its elements, a
// constant by its type. It returns nil for null.
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
	var conv func(t *grammar.Term, typ cql.TypeInfo, col string) ([]byte, error)
	switch typ.ID {
	case cql.TypeASCII, cql.TypeVarchar:
		conv = textLiteral
	case cql.TypeBlob:
		conv = blobLiteral
	case cql.TypeBoolean:
		conv = boolLiteral
	case cql.TypeTinyint, cql.TypeSmallint, cql.TypeInt, cql.TypeBigint, cql.TypeCounter, cql.TypeVarint:
		conv = integerLiteral
	case cql.TypeFloat, cql.TypeDouble, cql.TypeDecimal:
		conv = floatLiteral
	case cql.TypeCustom:
		conv = customLiteral
	case cql.TypeUUID, cql.TypeTimeUUID:
		conv = uuidLiteral
	case cql.TypeInet:
		conv = inetLiteral
	case cql.TypeTimestamp:
		conv = timestampLiteral
	case cql.TypeDate:
		conv = dateLiteral
	case cql.TypeTime:
		conv = timeLiteral
	case cql.TypeDuration:
		conv = durationLiteral
	default:
		return nil, Invalidf("type %s is not supported by the embedded node", typ.String())
	}
	return conv(t, typ, col)
}

// textLiteral converts a string constant for an ascii or text column.
func textLiteral(t *grammar.Term, typ cql.TypeInfo, col string) ([]byte, error) {
	if t.Lit != grammar.LitString {
		return nil, constError(t, col, typ)
	}
	if typ.ID == cql.TypeASCII {
		for i := 0; i < len(t.Text); i++ {
			if t.Text[i] >= 0x80 {
				return nil, Invalidf("Invalid ASCII character in string literal for %s", col)
			}
		}
	}
	return []byte(t.Text), nil
}

// blobLiteral converts a hex constant, 0x and an even number of digits, for a blob
// column: 0x is empty, not null.
func blobLiteral(t *grammar.Term, typ cql.TypeInfo, col string) ([]byte, error) {
	if t.Lit != grammar.LitHex {
		return nil, constError(t, col, typ)
	}
	s := t.Text[2:]
	if len(s)%2 == 1 {
		return nil, Invalidf("Invalid HEX constant (%s) for \"%s\" of type blob: odd number of digits", t.Text, col)
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, constError(t, col, typ)
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

// boolLiteral converts true or false, or a string of either in any case, for a boolean
// column.
func boolLiteral(t *grammar.Term, typ cql.TypeInfo, col string) ([]byte, error) {
	if t.Lit != grammar.LitBool {
		if t.Lit == grammar.LitString && (strings.EqualFold(t.Text, "true") || strings.EqualFold(t.Text, "false")) {
			return EncBool(strings.EqualFold(t.Text, "true")), nil
		}
		return nil, constError(t, col, typ)
	}
	return EncBool(t.Text == "true"), nil
}

// integerLiteral converts an integer constant for an integer column of fixed width, which
// it must fit, or a varint one.
func integerLiteral(t *grammar.Term, typ cql.TypeInfo, col string) ([]byte, error) {
	if t.Lit != grammar.LitInt {
		return nil, constError(t, col, typ)
	}
	if typ.ID == cql.TypeVarint {
		n, ok := new(big.Int).SetString(t.Text, 10)
		if !ok {
			return nil, constError(t, col, typ)
		}
		return EncVarint(n), nil
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
}

// floatLiteral converts an integer or floating point constant (NaN and Infinity
// included) for a float, double or decimal column.
func floatLiteral(t *grammar.Term, typ cql.TypeInfo, col string) ([]byte, error) {
	if t.Lit != grammar.LitInt && t.Lit != grammar.LitFloat {
		return nil, constError(t, col, typ)
	}
	if typ.ID == cql.TypeDecimal {
		b, ok := EncDecimal(t.Text)
		if !ok {
			return nil, constError(t, col, typ)
		}
		return b, nil
	}
	v, err := parseFloatLit(t.Text)
	if err != nil {
		return nil, constError(t, col, typ)
	}
	if typ.ID == cql.TypeFloat {
		return binary.BigEndian.AppendUint32(nil, math.Float32bits(float32(v))), nil
	}
	return EncDouble(v), nil
}

// customLiteral converts a constant for a custom type: a blob constant, or a uuid for
// LexicalUUIDType.
func customLiteral(t *grammar.Term, typ cql.TypeInfo, col string) ([]byte, error) {
	if t.Lit == grammar.LitHex && len(t.Text)%2 == 0 {
		if b, err := hex.DecodeString(t.Text[2:]); err == nil {
			return append([]byte{}, b...), Validate(typ, b, col)
		}
	}
	if t.Lit != grammar.LitUUID || !isLexicalUUID(typ) {
		return nil, constError(t, col, typ)
	}
	return hex.DecodeString(strings.ReplaceAll(t.Text, "-", ""))
}

// uuidLiteral converts a uuid constant for a uuid column, or a version 1 one for a
// timeuuid column.
func uuidLiteral(t *grammar.Term, typ cql.TypeInfo, col string) ([]byte, error) {
	if t.Lit != grammar.LitUUID {
		return nil, constError(t, col, typ)
	}
	u, err := hex.DecodeString(strings.ReplaceAll(t.Text, "-", ""))
	if err != nil || len(u) != 16 {
		return nil, constError(t, col, typ)
	}
	if typ.ID == cql.TypeTimeUUID && u[6]>>4 != 1 {
		return nil, Invalidf("Unsupported UUID version %d for timeuuid column %s", u[6]>>4, col)
	}
	return u, nil
}

// inetLiteral converts a string of an IPv4 or IPv6 address for an inet column.
func inetLiteral(t *grammar.Term, typ cql.TypeInfo, col string) ([]byte, error) {
	if t.Lit != grammar.LitString {
		return nil, constError(t, col, typ)
	}
	a, err := netip.ParseAddr(t.Text)
	if err != nil {
		return nil, Invalidf("Unable to make inet address from '%s'", t.Text)
	}
	return EncInet(a), nil
}

// timestampLiteral converts milliseconds since the epoch, or an ISO 8601 string, for a
// timestamp column.
func timestampLiteral(t *grammar.Term, typ cql.TypeInfo, col string) ([]byte, error) {
	switch t.Lit {
	case grammar.LitInt:
		v, err := strconv.ParseInt(t.Text, 10, 64)
		if err != nil {
			return nil, constError(t, col, typ)
		}
		return EncBigint(v), nil
	case grammar.LitString:
		ms, ok := parseTimestamp(t.Text)
		if !ok {
			return nil, Invalidf("Unable to coerce '%s' to a formatted date (long)", t.Text)
		}
		return EncBigint(ms), nil
	}
	return nil, constError(t, col, typ)
}

// dateLiteral converts a day number (the epoch being 2^31), as an integer or a string of
// one, or a yyyy-mm-dd string, for a date column.
func dateLiteral(t *grammar.Term, typ cql.TypeInfo, col string) ([]byte, error) {
	switch t.Lit {
	case grammar.LitInt:
		v, err := strconv.ParseUint(t.Text, 10, 32)
		if err != nil {
			return nil, constError(t, col, typ)
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
	return nil, constError(t, col, typ)
}

// timeLiteral converts nanoseconds since midnight, or an hh:mm:ss[.fffffffff] string,
// for a time column.
func timeLiteral(t *grammar.Term, typ cql.TypeInfo, col string) ([]byte, error) {
	switch t.Lit {
	case grammar.LitInt:
		v, err := strconv.ParseInt(t.Text, 10, 64)
		if err != nil || v < 0 || v >= 86400e9 {
			return nil, constError(t, col, typ)
		}
		return EncBigint(v), nil
	case grammar.LitString:
		ns, ok := parseTimeOfDay(t.Text)
		if !ok {
			return nil, Invalidf("Unable to coerce '%s' to a formatted time (long)", t.Text)
		}
		return EncBigint(ns), nil
	}
	return nil, constError(t, col, typ)
}

// durationLiteral converts a duration constant, its parts all of one sign, for a duration
// column.
func durationLiteral(t *grammar.Term, typ cql.TypeInfo, col string) ([]byte, error) {
	if t.Lit != grammar.LitDuration {
		return nil, constError(t, col, typ)
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

// collectionLiteral converts [...], {...} or {k: v, ...} for a list, set or map type, its
// elements at depth + 1: none may be null; a set's or map's come out sorted.
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

// KindName names the kind of a collection literal for Cassandra's messages, "value" for
// any other term.
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

// parseFloatLit parses a floating point constant, NaN and [-]Infinity in any case
// included.
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
