package cqlvalue

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
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

// JSON as Cassandra 4.1 maps it (the types' toJSONString and fromJSONObject): SELECT JSON,
// INSERT JSON, toJson() and fromJson().

// jsonName is how a column or field name appears as a JSON key: quoted when it is not all
// lower case, as Cassandra writes it.
func jsonName(n string) string {
	if n != strings.ToLower(n) {
		n = `"` + n + `"`
	}
	return jsonString(n)
}

// jsonString quotes s as Jackson's quoteAsString does.
func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// toJSON renders a serialized value of type t as Cassandra's toJSONString.
func ToJSON(t cql.TypeInfo, b []byte) string {
	if b == nil {
		return "null"
	}
	switch t.ID {
	case cql.TypeASCII, cql.TypeVarchar:
		return jsonString(string(b))
	case cql.TypeBoolean:
		if len(b) == 0 {
			return `""`
		}
		return strconv.FormatBool(b[0] != 0)
	case cql.TypeBlob:
		return `"0x` + hex.EncodeToString(b) + `"`
	case cql.TypeTinyint, cql.TypeSmallint, cql.TypeInt, cql.TypeBigint, cql.TypeCounter, cql.TypeVarint,
		cql.TypeFloat, cql.TypeDouble, cql.TypeDecimal:
		return numberJSON(t.ID, b)
	case cql.TypeUUID, cql.TypeTimeUUID:
		if len(b) != 16 {
			return `""`
		}
		return `"` + cql.FormatUUID([16]byte(b)) + `"`
	case cql.TypeInet:
		a, ok := netip.AddrFromSlice(b)
		if !ok {
			return `""`
		}
		return `"` + a.String() + `"`
	case cql.TypeTimestamp, cql.TypeDate, cql.TypeTime, cql.TypeDuration:
		return timeJSON(t.ID, b)
	case cql.TypeList, cql.TypeSet, cql.TypeMap:
		return collectionJSON(t, b)
	case cql.TypeTuple, cql.TypeUDT:
		return componentsJSON(t, b)
	}
	return `"0x` + hex.EncodeToString(b) + `"`
}

// numberJSON renders a serialized number of type id as a JSON number, as Java prints it;
// a value of the wrong size as "".
func numberJSON(id cql.TypeID, b []byte) string {
	switch id {
	case cql.TypeFloat:
		if len(b) != 4 {
			return `""`
		}
		return JavaFloat(float64(math.Float32frombits(binary.BigEndian.Uint32(b))), 32)
	case cql.TypeDouble:
		if len(b) != 8 {
			return `""`
		}
		return JavaFloat(math.Float64frombits(binary.BigEndian.Uint64(b)), 64)
	case cql.TypeDecimal:
		if len(b) < 4 {
			return `""`
		}
		return JavaDecimal(DecVarint(b[4:]), int32(binary.BigEndian.Uint32(b)))
	}
	if len(b) == 0 {
		return `""`
	}
	return DecVarint(b).String()
}

// timeJSON renders a serialized timestamp, date, time or duration (type id) as the JSON
// string Cassandra writes; a value of the wrong size as "".
func timeJSON(id cql.TypeID, b []byte) string {
	switch id {
	case cql.TypeTimestamp:
		v, ok := Int64Value(b)
		if !ok {
			return `""`
		}
		return `"` + time.UnixMilli(v).UTC().Format("2006-01-02 15:04:05.000Z") + `"`
	case cql.TypeDate:
		v, ok := Int32Value(b)
		if !ok {
			return `""`
		}
		days := int64(uint32(v)) - 1<<31
		return `"` + time.Unix(days*86400, 0).UTC().Format("2006-01-02") + `"`
	case cql.TypeTime:
		v, ok := Int64Value(b)
		if !ok {
			return `""`
		}
		return `"` + timeOfDay(v) + `"`
	}
	d, ok := grammar.DecDuration(b)
	if !ok {
		return `""`
	}
	return `"` + d.String() + `"`
}

// collectionJSON renders a serialized list or set of type t as a JSON array, a map as a
// JSON object whose keys are the keys' JSON as strings.
func collectionJSON(t cql.TypeInfo, b []byte) string {
	if t.ID != cql.TypeMap {
		elems, _ := DecCollection(b, 1)
		parts := make([]string, len(elems))
		for i, e := range elems {
			parts[i] = ToJSON(ElemType(t), e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	elems, _ := DecCollection(b, 2)
	parts := make([]string, 0, len(elems)/2)
	for i := 0; i+1 < len(elems); i += 2 {
		k := ToJSON(KeyType(t), elems[i])
		if !strings.HasPrefix(k, `"`) {
			k = jsonString(k)
		}
		parts = append(parts, k+": "+ToJSON(ElemType(t), elems[i+1]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// componentsJSON renders a serialized tuple of type t as a JSON array, a user type value
// as a JSON object of its fields; the components a value lacks are null.
func componentsJSON(t cql.TypeInfo, b []byte) string {
	elems, _ := DecTuple(b)
	component := func(i int) []byte {
		if i < len(elems) {
			return elems[i]
		}
		return nil
	}
	if t.ID == cql.TypeTuple {
		parts := make([]string, len(t.Elems))
		for i, e := range t.Elems {
			parts[i] = ToJSON(e, component(i))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	parts := make([]string, len(t.Fields))
	for i, f := range t.Fields {
		parts[i] = jsonString(QuoteName(f.Name)) + ": " + ToJSON(f.Type, component(i))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// timeOfDay spells nanoseconds since midnight as Cassandra's TimeSerializer: hh:mm:ss.nnnnnnnnn.
func timeOfDay(ns int64) string {
	return fmt.Sprintf("%02d:%02d:%02d.%09d", ns/grammar.NanosPerHour, ns/grammar.NanosPerMinute%60, ns/grammar.NanosPerSecond%60, ns%grammar.NanosPerSecond)
}

// javaFloat spells a float or double as Java's Float.toString and Double.toString; JSON
// has no NaN nor infinity, for which Cassandra writes null.
func JavaFloat(v float64, bitSize int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "null"
	}
	if v == 0 {
		if math.Signbit(v) {
			return "-0.0"
		}
		return "0.0"
	}
	sign := ""
	if v < 0 {
		sign, v = "-", -v
	}
	// The shortest digits that read back as v, and the decimal exponent.
	e := strconv.FormatFloat(v, 'e', -1, bitSize)
	mant, exp, _ := strings.Cut(e, "e")
	x, _ := strconv.Atoi(exp)
	digits := strings.Replace(mant, ".", "", 1)
	if len(digits) == 1 {
		// Java never stops at one digit: it prints the two-digit decimal nearest v, which
		// differs from d.0 only where one digit is far from exact (4.9E-324, 1.4E-45).
		m2, _, _ := strings.Cut(strconv.FormatFloat(v, 'e', 1, bitSize), "e")
		if d2 := strings.Replace(m2, ".", "", 1); d2[1] != '0' {
			digits = d2
		}
	}
	if v >= 1e-3 && v < 1e7 {
		var s string
		switch {
		case x >= 0:
			for len(digits) <= x {
				digits += "0"
			}
			s = digits[:x+1] + "." + digits[x+1:]
			if strings.HasSuffix(s, ".") {
				s += "0"
			}
		default:
			s = "0." + strings.Repeat("0", -x-1) + digits
		}
		return sign + s
	}
	frac := digits[1:]
	if frac == "" {
		frac = "0"
	}
	return sign + digits[:1] + "." + frac + "E" + strconv.Itoa(x)
}

// javaDecimal spells unscaled × 10^-scale as Java's BigDecimal.toString.
func JavaDecimal(u *big.Int, scale int32) string {
	digits := new(big.Int).Abs(u).String()
	sign := ""
	if u.Sign() < 0 {
		sign = "-"
	}
	adjusted := -int64(scale) + int64(len(digits)-1)
	if scale >= 0 && adjusted >= -6 {
		if scale == 0 {
			return sign + digits
		}
		for int64(len(digits)) <= int64(scale) {
			digits = "0" + digits
		}
		p := len(digits) - int(scale)
		return sign + digits[:p] + "." + digits[p:]
	}
	s := digits[:1]
	if len(digits) > 1 {
		s += "." + digits[1:]
	}
	e := "E"
	if adjusted >= 0 {
		e += "+"
	}
	return sign + s + e + strconv.FormatInt(adjusted, 10)
}

// rowJSON renders a row as the one [json] value of SELECT JSON.
func RowJSON(specs []cql.ColumnSpec, row [][]byte) []byte {
	var b strings.Builder
	b.WriteByte('{')
	for i, s := range specs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(jsonName(s.Name))
		b.WriteString(": ")
		b.WriteString(ToJSON(s.Type, row[i]))
	}
	b.WriteByte('}')
	return []byte(b.String())
}

// decodeJSON parses JSON text, keeping numbers as their text.
func DecodeJSON(s string) (any, error) {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("unexpected content after the JSON value")
	}
	return v, nil
}

// jsonClass is the Java class Cassandra's JSON parser makes of a value, for its messages.
func JsonClass(v any) string {
	switch v := v.(type) {
	case string:
		return "String"
	case bool:
		return "Boolean"
	case json.Number:
		if _, err := strconv.ParseInt(string(v), 10, 32); err == nil {
			return "Integer"
		}
		if _, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return "Long"
		}
		if strings.ContainsAny(string(v), ".eE") {
			return "Double"
		}
		return "BigInteger"
	case []any:
		return "ArrayList"
	case map[string]any:
		return "LinkedHashMap"
	}
	return "Object"
}

// jsonText is a JSON value as Java prints it in Cassandra's messages.
func jsonText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case json.Number:
		return string(v)
	case nil:
		return "null"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func expected(what string, v any) error {
	return fmt.Errorf("Expected %s, but got a %s: %s", what, JsonClass(v), jsonText(v))
}

// fromJSON converts a parsed JSON value to the serialization of type t, as t's
// fromJSONObject; nil is null.
func FromJSON(v any, t cql.TypeInfo, depth int) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	if depth > grammar.MaxNesting {
		return nil, fmt.Errorf("JSON value nested too deep")
	}
	switch t.ID {
	case cql.TypeList, cql.TypeSet, cql.TypeTuple:
		dv, err := decodeJSONString(v)
		if err != nil {
			return nil, err
		}
		list, ok := dv.([]any)
		if !ok {
			return nil, expected(map[cql.TypeID]string{cql.TypeList: "a list", cql.TypeSet: "a list (representing a set)", cql.TypeTuple: "a list representation of a tuple"}[t.ID], dv)
		}
		if t.ID == cql.TypeTuple {
			return tupleFromJSON(list, t, depth)
		}
		return listFromJSON(list, t, depth)
	case cql.TypeMap, cql.TypeUDT:
		dv, err := decodeJSONString(v)
		if err != nil {
			return nil, err
		}
		m, ok := dv.(map[string]any)
		if !ok {
			return nil, expected("a map", dv)
		}
		if t.ID == cql.TypeUDT {
			return udtFromJSON(m, t, depth)
		}
		return mapFromJSON(m, t, depth)
	}
	return scalarFromJSON(v, t)
}

// scalarFromJSON converts a parsed JSON value to the serialization of t, a type of one
// value: from its JSON type as Cassandra's fromJSONObject takes it, through the CQL
// constant it spells.
func scalarFromJSON(v any, t cql.TypeInfo) ([]byte, error) {
	num, isNum := v.(json.Number)
	str, isStr := v.(string)
	switch t.ID {
	case cql.TypeASCII, cql.TypeVarchar:
		if !isStr {
			if t.ID == cql.TypeASCII {
				return nil, expected("an ascii string", v)
			}
			return nil, expected("a UTF-8 string", v)
		}
		return jsonConstant(t, grammar.LitString, str)
	case cql.TypeBoolean:
		if b, ok := v.(bool); ok {
			return EncBool(b), nil
		}
		if isStr && (strings.EqualFold(str, "true") || strings.EqualFold(str, "false")) {
			return EncBool(strings.EqualFold(str, "true")), nil
		}
		if isStr {
			return nil, fmt.Errorf("Unable to make boolean from '%s'", str)
		}
		return nil, expected("a boolean value", v)
	case cql.TypeBlob:
		if !isStr {
			return nil, expected("a hex string representing bytes", v)
		}
		if !strings.HasPrefix(str, "0x") {
			return nil, fmt.Errorf("String representation of blob is missing 0x prefix: %s", str)
		}
		return jsonConstant(t, grammar.LitHex, str)
	case cql.TypeTinyint, cql.TypeSmallint, cql.TypeInt, cql.TypeBigint, cql.TypeCounter, cql.TypeVarint,
		cql.TypeFloat, cql.TypeDouble, cql.TypeDecimal:
		return numberFromJSON(v, t)
	case cql.TypeUUID, cql.TypeTimeUUID:
		if !isStr {
			return nil, expected("a string representation of a uuid", v)
		}
		return jsonConstant(t, grammar.LitUUID, str)
	case cql.TypeTimestamp:
		if isNum {
			return jsonConstant(t, grammar.LitInt, string(num))
		}
		if !isStr {
			return nil, expected("a long or a datestring representation of a timestamp value", v)
		}
		return jsonConstant(t, grammar.LitString, str)
	case cql.TypeDate, cql.TypeTime, cql.TypeInet:
		if isNum && t.ID != cql.TypeInet {
			return jsonConstant(t, grammar.LitInt, string(num))
		}
		if !isStr {
			return nil, expected("a string representation of a "+t.String(), v)
		}
		return jsonConstant(t, grammar.LitString, str)
	case cql.TypeDuration:
		if !isStr {
			return nil, expected("a string representation of a duration", v)
		}
		return jsonConstant(t, grammar.LitDuration, str)
	}
	return nil, fmt.Errorf("JSON is not supported for type %s", t.String())
}

// numberFromJSON converts a JSON number, or a string of one, to the serialization of t,
// an integer, floating point or decimal type; an integer type takes no fraction nor
// exponent.
func numberFromJSON(v any, t cql.TypeInfo) ([]byte, error) {
	num, isNum := v.(json.Number)
	str, isStr := v.(string)
	switch t.ID {
	case cql.TypeFloat, cql.TypeDouble, cql.TypeDecimal:
		if isStr {
			lit := grammar.LitFloat
			if _, err := strconv.ParseInt(str, 10, 64); err == nil {
				lit = grammar.LitInt
			}
			return jsonConstant(t, lit, str)
		}
		if !isNum {
			return nil, expected(map[cql.TypeID]string{cql.TypeFloat: "a float value", cql.TypeDouble: "a double value", cql.TypeDecimal: "a decimal value"}[t.ID], v)
		}
		return jsonConstant(t, grammar.LitFloat, string(num))
	}
	if isStr {
		return jsonConstant(t, grammar.LitInt, strings.TrimSpace(str))
	}
	if !isNum || strings.ContainsAny(string(num), ".eE") {
		names := map[cql.TypeID]string{cql.TypeTinyint: "a tinyint value", cql.TypeSmallint: "a smallint value",
			cql.TypeInt: "an int value", cql.TypeBigint: "a bigint value", cql.TypeCounter: "a bigint value",
			cql.TypeVarint: "an integer value"}
		return nil, expected(names[t.ID], v)
	}
	return jsonConstant(t, grammar.LitInt, string(num))
}

// jsonConstant converts the text of a JSON value, read as a CQL constant of kind lit, to
// the serialization of t, with the message of Cassandra's fromString when it does not fit.
func jsonConstant(t cql.TypeInfo, lit grammar.LitKind, text string) ([]byte, error) {
	b, err := Literal(&grammar.Term{Kind: grammar.TermConst, Lit: lit, Text: text}, t, "")
	if err != nil {
		// The Java type that Cassandra's fromString names.
		name := map[cql.TypeID]string{cql.TypeTinyint: "byte", cql.TypeSmallint: "short", cql.TypeBigint: "long", cql.TypeCounter: "long"}[t.ID]
		if name == "" {
			name = t.String()
		}
		return nil, fmt.Errorf("Unable to make %s from '%s'", name, text)
	}
	return b, nil
}

// decodeJSONString returns v, or the JSON value it spells when it is a string: a
// collection, tuple or user type value may be given as either.
func decodeJSONString(v any) (any, error) {
	str, ok := v.(string)
	if !ok {
		return v, nil
	}
	dv, err := DecodeJSON(str)
	if err != nil {
		return nil, fmt.Errorf("Could not decode JSON string '%s': %v", str, err)
	}
	return dv, nil
}

// tupleFromJSON converts a JSON array to the serialization of tuple type t, its
// components at depth + 1; those missing are null.
func tupleFromJSON(list []any, t cql.TypeInfo, depth int) ([]byte, error) {
	if len(list) > len(t.Elems) {
		return nil, fmt.Errorf("Tuple contains extra items (expected %d): %s", len(t.Elems), jsonText(list))
	}
	elems := make([][]byte, len(t.Elems))
	for i, e := range list {
		b, err := FromJSON(e, t.Elems[i], depth+1)
		if err != nil {
			return nil, err
		}
		elems[i] = b
	}
	return EncTuple(elems), nil
}

// listFromJSON converts a JSON array to the serialization of list or set type t, its
// elements at depth + 1, none null; a set's come out sorted.
func listFromJSON(list []any, t cql.TypeInfo, depth int) ([]byte, error) {
	elems := make([][]byte, 0, len(list))
	for _, e := range list {
		b, err := FromJSON(e, ElemType(t), depth+1)
		if err != nil {
			return nil, err
		}
		if b == nil {
			return nil, fmt.Errorf("Invalid null element in list")
		}
		elems = append(elems, b)
	}
	return NormalizeCollection(t, EncCollection(elems)), nil
}

// sortedKeys returns m's keys in order.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// udtFromJSON converts a JSON object to the serialization of user type t, its fields at
// depth + 1, named as columns are (JsonKeyName); those missing are null.
func udtFromJSON(m map[string]any, t cql.TypeInfo, depth int) ([]byte, error) {
	elems := make([][]byte, len(t.Fields))
	for _, k := range sortedKeys(m) {
		name := JsonKeyName(k)
		i := slices.IndexFunc(t.Fields, func(f cql.Field) bool { return f.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("Unknown field '%s' in value of user defined type %s", name, t.Name)
		}
		b, err := FromJSON(m[k], t.Fields[i].Type, depth+1)
		if err != nil {
			return nil, err
		}
		elems[i] = b
	}
	return EncTuple(elems), nil
}

// mapFromJSON converts a JSON object to the serialization of map type t, its keys and
// values at depth + 1, none null, sorted by key. A key of a type other than text is the
// JSON it spells, or else the string itself.
func mapFromJSON(m map[string]any, t cql.TypeInfo, depth int) ([]byte, error) {
	elems := make([][]byte, 0, 2*len(m))
	kt := KeyType(t)
	for _, k := range sortedKeys(m) {
		var kv any = k
		if kt.ID != cql.TypeASCII && kt.ID != cql.TypeVarchar {
			if parsed, err := DecodeJSON(k); err == nil {
				kv = parsed
			}
		}
		kb, err := FromJSON(kv, kt, depth+1)
		if err != nil {
			return nil, err
		}
		vb, err := FromJSON(m[k], ElemType(t), depth+1)
		if err != nil {
			return nil, err
		}
		if kb == nil || vb == nil {
			return nil, fmt.Errorf("Invalid null value in map")
		}
		elems = append(elems, kb, vb)
	}
	b := EncCollection(elems)
	binary.BigEndian.PutUint32(b, uint32(len(m)))
	return NormalizeCollection(t, b), nil
}

// jsonKeyName is the column or field a JSON key names: as written when quoted, else in
// lower case, as CQL names are.
func JsonKeyName(k string) string {
	if len(k) >= 2 && k[0] == '"' && k[len(k)-1] == '"' {
		return strings.ReplaceAll(k[1:len(k)-1], `""`, `"`)
	}
	return strings.ToLower(k)
}
