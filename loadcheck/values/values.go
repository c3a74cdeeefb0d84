// Package values makes the values of CQL types that loadcheck sends, from seeds: a
// replay's partition keys from their keyed hash (the same hash, the same key, so that keys
// repeat as in the capture) and its other values at their recorded types and lengths, and
// a profile's column values from its generator's random bytes; and a value as a CQL
// Literal. It knows nothing of captures, profiles or connections.
package values

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// typeSizes are the CQL types the replay generates, with the size of a fixed-size value
// (0 for a value of any length).
var typeSizes = map[string]int{
	"ascii": 0, "text": 0, "varchar": 0, "blob": 0, "varint": 0, "decimal": 0,
	"bigint": 8, "counter": 8, "timestamp": 8, "time": 8, "double": 8,
	"int": 4, "date": 4, "float": 4, "smallint": 2, "tinyint": 1, "boolean": 1,
	"uuid": 16, "timeuuid": 16, "inet": 4, "duration": 0,
}

// DefaultLen is the length of a generated value of a variable-size type without a
// recorded length.
const DefaultLen = 16

// Alnum are the characters of a generated text value.
const Alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// expand returns n bytes drawn from seed: the seed's SHA-256 chain.
func expand(seed []byte, n int) []byte {
	out := make([]byte, 0, n+sha256.Size)
	h := sha256.Sum256(seed)
	for len(out) < n {
		out = append(out, h[:]...)
		h = sha256.Sum256(h[:])
	}
	return out[:n]
}

// Key returns component i of the partition key whose keyed hash is key, as a value
// of typ and length n (-1 or less: the type's usual length).
func Key(key []byte, i int, typ string, n int32) []byte {
	seed := append([]byte{byte(i)}, key...)
	return Of(typ, n, expand(seed, 64))
}

// Filler returns a value of typ and length n for a column that is not a key.
func Filler(typ string, n int32) []byte {
	return Of(typ, n, expand([]byte(typ+strconv.Itoa(int(n))), 64))
}

// Index returns the value of a clustering column for row i of a partition.
func Index(typ string, i int, n int32) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(i))
	switch typ {
	case "int", "date":
		return b[4:]
	case "bigint", "timestamp", "time", "counter":
		return b[:]
	case "smallint":
		return b[6:]
	case "tinyint":
		return b[7:]
	case "text", "varchar", "ascii":
		w := max(int(n), 6)
		return []byte(fmt.Sprintf("%0*d", w, i))
	}
	return Of(typ, n, expand(b[:], 64))
}

// Fix makes random bytes v a valid value of fixed-size type typ.
func Fix(typ string, v []byte) {
	switch typ {
	case "uuid":
		v[6], v[8] = v[6]&0x0f|0x40, v[8]&0x3f|0x80
	case "timeuuid":
		v[6], v[8] = v[6]&0x0f|0x10, v[8]&0x3f|0x80
	case "date":
		v[0] = 0x80 // near the epoch, a valid date
	case "boolean":
		v[0] &= 1
	}
}

// Of returns a value of typ and length n made from the random bytes r (at least 64).
func Of(typ string, n int32, r []byte) []byte {
	typ = strings.TrimSpace(typ)
	if inner, ok := strings.CutPrefix(typ, "frozen<"); ok {
		typ = strings.TrimSuffix(inner, ">")
	}
	size, simple := typeSizes[typ]
	switch {
	case simple && size > 0:
		v := append([]byte(nil), r[:size]...)
		Fix(typ, v)
		return v
	case simple:
		l := int(n)
		if l < 0 {
			l = DefaultLen
		}
		switch typ {
		case "blob":
			return expand(r, l)
		case "varint":
			return expand(r, max(l, 1))
		case "decimal":
			return append([]byte{0, 0, 0, 2}, expand(r, max(l-4, 1))...)
		case "duration":
			return []byte{2, 4, 6} // months, days, nanoseconds as vints
		}
		// Text: letters and digits, valid UTF-8 and ASCII.
		out := make([]byte, l)
		src := expand(r, l)
		for i := range out {
			out[i] = Alnum[int(src[i])%len(Alnum)]
		}
		return out
	}
	// Collections: as many elements of the element type as the length holds.
	if inner, ok := strings.CutPrefix(typ, "list<"); ok {
		return collection(strings.TrimSuffix(inner, ">"), "", n, r)
	}
	if inner, ok := strings.CutPrefix(typ, "set<"); ok {
		return collection(strings.TrimSuffix(inner, ">"), "", n, r)
	}
	if inner, ok := strings.CutPrefix(typ, "map<"); ok {
		kv := SplitTypes(strings.TrimSuffix(inner, ">"))
		if len(kv) == 2 {
			return collection(kv[0], kv[1], n, r)
		}
	}
	if inner, ok := strings.CutPrefix(typ, "tuple<"); ok {
		var out []byte
		for i, e := range SplitTypes(strings.TrimSuffix(inner, ">")) {
			v := Of(e, -1, expand(append(r, byte(i)), 64))
			out = binary.BigEndian.AppendUint32(out, uint32(len(v)))
			out = append(out, v...)
		}
		return out
	}
	return expand(r, max(int(n), 0))
}

// collection returns a list or set of elem, or a map of elem to val, of about n bytes
// encoded, with distinct elements.
func collection(elem, val string, n int32, r []byte) []byte {
	per := 4 + ElemLen(elem)
	if val != "" {
		per += 4 + ElemLen(val)
	}
	count := 0
	if n > 4 {
		count = min(int(n-4)/per, 64)
	}
	out := binary.BigEndian.AppendUint32(nil, uint32(count))
	for i := range count {
		e := Index(elem, i, int32(ElemLen(elem)))
		out = binary.BigEndian.AppendUint32(out, uint32(len(e)))
		out = append(out, e...)
		if val != "" {
			v := Of(val, int32(ElemLen(val)), expand(append(r, byte(i)), 64))
			out = binary.BigEndian.AppendUint32(out, uint32(len(v)))
			out = append(out, v...)
		}
	}
	return out
}

func ElemLen(typ string) int {
	if s, ok := typeSizes[typ]; ok && s > 0 {
		return s
	}
	return 8
}

// Literal returns the CQL text of a value of typ, for a literal of the given kind in a
// statement's text: a key made from its hash, or a filler of the recorded length.
func Literal(kind, typ string, v []byte) string {
	switch kind {
	case "list":
		return "[]"
	case "collection":
		return "{}"
	}
	switch typ {
	case "text", "varchar", "ascii":
		return "'" + strings.ReplaceAll(string(v), "'", "''") + "'"
	case "int", "date":
		if len(v) == 4 {
			return strconv.FormatInt(int64(int32(binary.BigEndian.Uint32(v))), 10)
		}
	case "bigint", "counter", "timestamp", "time":
		if len(v) == 8 {
			return strconv.FormatInt(int64(binary.BigEndian.Uint64(v)), 10)
		}
	case "smallint":
		if len(v) == 2 {
			return strconv.Itoa(int(int16(binary.BigEndian.Uint16(v))))
		}
	case "tinyint":
		if len(v) == 1 {
			return strconv.Itoa(int(int8(v[0])))
		}
	case "boolean":
		if len(v) == 1 && v[0] != 0 {
			return "true"
		}
		return "false"
	case "uuid", "timeuuid":
		if len(v) == 16 {
			h := hex.EncodeToString(v)
			return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
		}
	case "double", "float", "decimal":
		return "1.5"
	case "blob":
		return "0x" + hex.EncodeToString(v)
	case "duration":
		return "1h"
	}
	switch kind {
	case "string":
		return "'" + strings.Repeat("x", len(v)) + "'"
	case "integer":
		return "1"
	case "float":
		return "1.5"
	case "boolean":
		return "true"
	case "blob":
		return "0x" + hex.EncodeToString(v)
	case "uuid":
		return "00000000-0000-4000-8000-000000000000"
	case "duration":
		return "1h"
	}
	return "null"
}

// SplitTypes splits "a, map<b, c>" at its top-level commas.
func SplitTypes(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '<':
			depth++
		case '>':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	return append(out, strings.TrimSpace(s[start:]))
}

// Size returns the size of a fixed-size value of CQL type typ (0 for a value of any
// length), and whether values of typ are made here.
func Size(typ string) (int, bool) {
	n, ok := typeSizes[typ]
	return n, ok
}
