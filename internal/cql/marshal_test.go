package cql

import (
	"bytes"
	"errors"
	"math"
	"math/big"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

func bigInt(tb testing.TB, s string) *big.Int {
	tb.Helper()
	x, ok := new(big.Int).SetString(s, 10)
	if !ok {
		tb.Fatalf("bad big int %q", s)
	}
	return x
}

func TestMarshalRoundTrip(t *testing.T) {
	udt := TypeInfo{ID: TypeUDT, Keyspace: "ks", Name: "addr", Fields: []Field{
		{Name: "street", Type: Simple(TypeVarchar)}, {Name: "zip", Type: Simple(TypeInt)}}}
	tuple := TypeInfo{ID: TypeTuple, Elems: []TypeInfo{Simple(TypeInt), Simple(TypeVarchar)}}
	ts := time.Date(2024, 5, 6, 7, 8, 9, 123e6, time.UTC)
	u := [16]byte{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0x11, 0xef, 0x80, 1, 2, 3, 4, 5, 6, 7}
	tests := []struct {
		name string
		t    TypeInfo
		in   any
		wire string // hex
		out  any    // what Unmarshal gives, when it differs from in
	}{
		{"ascii", Simple(TypeASCII), "abc", "616263", nil},
		{"text", Simple(TypeVarchar), "héllo", "68c3a96c6c6f", nil},
		{"text empty", Simple(TypeVarchar), "", "", nil},
		{"text from bytes", Simple(TypeVarchar), []byte("x"), "78", "x"},
		{"bigint", Simple(TypeBigint), int64(-2), "fffffffffffffffe", nil},
		{"bigint from int", Simple(TypeBigint), 7, "0000000000000007", int64(7)},
		{"counter", Simple(TypeCounter), int64(math.MaxInt64), "7fffffffffffffff", nil},
		{"blob", Simple(TypeBlob), []byte{1, 2}, "0102", nil},
		{"blob empty", Simple(TypeBlob), []byte{}, "", nil},
		{"blob from string", Simple(TypeBlob), "hi", "6869", []byte("hi")},
		{"boolean true", Simple(TypeBoolean), true, "01", nil},
		{"boolean false", Simple(TypeBoolean), false, "00", nil},
		{"decimal", Simple(TypeDecimal), Decimal{Unscaled: big.NewInt(-12340), Scale: 3}, "00000003cfcc", nil},
		{"decimal nil unscaled", Simple(TypeDecimal), Decimal{Scale: 1}, "0000000100", Decimal{Unscaled: big.NewInt(0), Scale: 1}},
		{"double", Simple(TypeDouble), 1.5, "3ff8000000000000", nil},
		{"float", Simple(TypeFloat), float32(-2.5), "c0200000", nil},
		{"float from float64", Simple(TypeFloat), 0.5, "3f000000", float32(0.5)},
		{"int", Simple(TypeInt), int32(-1), "ffffffff", nil},
		{"int from uint16", Simple(TypeInt), uint16(65535), "0000ffff", int32(65535)},
		{"timestamp", Simple(TypeTimestamp), ts, "0000018f4cbb3823", nil},
		{"timestamp from ms", Simple(TypeTimestamp), int64(0), "0000000000000000", time.UnixMilli(0).UTC()},
		{"uuid", Simple(TypeUUID), u, "123456789abc11ef8001020304050607", nil},
		{"uuid from string", Simple(TypeUUID), "123456789ABC11EF8001020304050607"[:0] + "12345678-9abc-11ef-8001-020304050607", "123456789abc11ef8001020304050607", u},
		{"timeuuid", Simple(TypeTimeUUID), u, "123456789abc11ef8001020304050607", nil},
		{"varint zero", Simple(TypeVarint), big.NewInt(0), "00", nil},
		{"varint 127", Simple(TypeVarint), big.NewInt(127), "7f", nil},
		{"varint 128", Simple(TypeVarint), big.NewInt(128), "0080", nil},
		{"varint -128", Simple(TypeVarint), big.NewInt(-128), "80", nil},
		{"varint -129", Simple(TypeVarint), big.NewInt(-129), "ff7f", nil},
		{"varint -1", Simple(TypeVarint), big.NewInt(-1), "ff", nil},
		{"varint from int", Simple(TypeVarint), 256, "0100", big.NewInt(256)},
		{"varint from uint64", Simple(TypeVarint), uint64(math.MaxUint64), "00ffffffffffffffff", bigInt(t, "18446744073709551615")},
		{"varint big", Simple(TypeVarint), bigInt(t, "18446744073709551616"), "010000000000000000", nil},
		{"varint big negative", Simple(TypeVarint), bigInt(t, "-18446744073709551616"), "ff0000000000000000", nil},
		{"varint big negative edge", Simple(TypeVarint), bigInt(t, "-9223372036854775809"), "ff7fffffffffffffff", nil},
		{"inet4", Simple(TypeInet), netip.MustParseAddr("10.1.2.3"), "0a010203", nil},
		{"inet6", Simple(TypeInet), netip.MustParseAddr("2001:db8::1"), "20010db8000000000000000000000001", nil},
		{"inet from string", Simple(TypeInet), "127.0.0.1", "7f000001", netip.MustParseAddr("127.0.0.1")},
		{"date epoch", Simple(TypeDate), uint32(1 << 31), "80000000", nil},
		{"date from time", Simple(TypeDate), time.Date(1969, 12, 31, 12, 0, 0, 0, time.UTC), "7fffffff", uint32(1<<31 - 1)},
		{"time", Simple(TypeTime), int64(3600e9), "0000034630b8a000", nil},
		{"time from duration", Simple(TypeTime), time.Second, "000000003b9aca00", int64(1e9)},
		{"smallint", Simple(TypeSmallint), int16(-300), "fed4", nil},
		{"tinyint", Simple(TypeTinyint), int8(-3), "fd", nil},
		{"duration", Simple(TypeDuration), Duration{Months: 1, Days: 2, Nanos: 3}, "020406", nil},
		{"duration negative", Simple(TypeDuration), Duration{Months: -1, Days: 0, Nanos: -1000}, "0100 87cf"[:2] + "00" + "87cf", nil},
		{"duration big", Simple(TypeDuration), Duration{Nanos: math.MaxInt64}, "0000fffffffffffffffffe", nil},
		{"duration from time.Duration", Simple(TypeDuration), 2 * time.Nanosecond, "000004", Duration{Nanos: 2}},
		{"list", ListOf(Simple(TypeInt)), []any{int32(1), nil, int32(3)}, "00000003 00000004 00000001 ffffffff 00000004 00000003", nil},
		{"list empty", ListOf(Simple(TypeInt)), []any{}, "00000000", nil},
		{"list from typed slice", ListOf(Simple(TypeVarchar)), []string{"a"}, "00000001 00000001 61", []any{"a"}},
		{"set", SetOf(Simple(TypeASCII)), []any{"a", "b"}, "00000002 00000001 61 00000001 62", nil},
		{"map", MapOf(Simple(TypeVarchar), Simple(TypeBigint)), []MapEntry{{"b", int64(2)}, {"a", int64(1)}},
			"00000002 00000001 62 00000008 0000000000000002 00000001 61 00000008 0000000000000001", nil},
		{"map from go map", MapOf(Simple(TypeVarchar), Simple(TypeInt)), map[string]int{"k": 5},
			"00000001 00000001 6b 00000004 00000005", []MapEntry{{"k", int32(5)}}},
		{"nested", ListOf(MapOf(Simple(TypeInt), SetOf(Simple(TypeBoolean)))), []any{[]MapEntry{{int32(1), []any{true}}}},
			"00000001 00000019 00000001 00000004 00000001 00000009 00000001 00000001 01", nil},
		{"tuple", tuple, []any{int32(1), "x"}, "00000004 00000001 00000001 78", nil},
		{"tuple with null", tuple, []any{nil, "x"}, "ffffffff 00000001 78", nil},
		{"tuple short", tuple, []any{int32(1)}, "00000004 00000001", []any{int32(1), nil}},
		{"udt", udt, map[string]any{"street": "main", "zip": int32(12345)}, "00000004 6d61696e 00000004 00003039", nil},
		{"udt missing field", udt, map[string]any{"zip": 1}, "ffffffff 00000004 00000001", map[string]any{"street": nil, "zip": int32(1)}},
		{"custom", TypeInfo{ID: TypeCustom, Custom: "x.Y"}, []byte{9}, "09", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wire := mustHex(t, tc.wire)
			got, err := Marshal(tc.t, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, wire) || got == nil {
				t.Fatalf("Marshal = %x (nil %v); want %x", got, got == nil, wire)
			}
			v, err := Unmarshal(tc.t, wire)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.out
			if want == nil {
				want = tc.in
			}
			if !reflect.DeepEqual(v, want) {
				if a, ok := v.(*big.Int); ok && a.Cmp(want.(*big.Int)) == 0 {
					return
				}
				if a, ok := v.(Decimal); ok && a.Scale == want.(Decimal).Scale && a.Unscaled.Cmp(want.(Decimal).Unscaled) == 0 {
					return
				}
				t.Fatalf("Unmarshal = %#v; want %#v", v, want)
			}
		})
	}
}

func TestMarshalNull(t *testing.T) {
	var nilBig *big.Int
	var nilSlice []any
	for _, v := range []any{nil, nilBig, nilSlice, []byte(nil), map[string]any(nil)} {
		b, err := Marshal(Simple(TypeBlob), v)
		if err != nil || b != nil {
			t.Fatalf("Marshal(%#v) = %x, %v; want nil", v, b, err)
		}
	}
	for _, ti := range []TypeInfo{Simple(TypeInt), Simple(TypeVarchar), ListOf(Simple(TypeInt))} {
		if v, err := Unmarshal(ti, nil); v != nil || err != nil {
			t.Fatalf("Unmarshal(%s, nil) = %v, %v", ti, v, err)
		}
	}
	// Empty values of types whose encoding cannot be empty are null.
	if v, err := Unmarshal(Simple(TypeInt), []byte{}); v != nil || err != nil {
		t.Fatalf("Unmarshal(int, empty) = %v, %v", v, err)
	}
}

func TestMarshalErrors(t *testing.T) {
	deep := Simple(TypeInt)
	for i := 0; i < 40; i++ {
		deep = ListOf(deep)
	}
	var deepVal any = int32(1)
	for i := 0; i < 40; i++ {
		deepVal = []any{deepVal}
	}
	tests := []struct {
		name string
		t    TypeInfo
		v    any
	}{
		{"int overflow", Simple(TypeInt), int64(1) << 40},
		{"tinyint overflow", Simple(TypeTinyint), 200},
		{"uint64 overflow", Simple(TypeBigint), uint64(math.MaxUint64)},
		{"int from string", Simple(TypeInt), "1"},
		{"ascii non ascii", Simple(TypeASCII), "é"},
		{"text bad utf8", Simple(TypeVarchar), "\xff"},
		{"uuid bad string", Simple(TypeUUID), "nope"},
		{"timeuuid version 4", Simple(TypeTimeUUID), "6ba7b810-9dad-41d1-80b4-00c04fd430c8"},
		{"inet bad", Simple(TypeInet), "300.1.1.1"},
		{"inet zero", Simple(TypeInet), netip.Addr{}},
		{"time out of day", Simple(TypeTime), int64(86400e9)},
		{"date negative", Simple(TypeDate), -1},
		{"duration mixed signs", Simple(TypeDuration), Duration{Months: 1, Nanos: -1}},
		{"tuple too long", TypeInfo{ID: TypeTuple, Elems: []TypeInfo{Simple(TypeInt)}}, []any{1, 2}},
		{"udt unknown field", TypeInfo{ID: TypeUDT, Fields: []Field{{Name: "a", Type: Simple(TypeInt)}}}, map[string]any{"b": 1}},
		{"list no elem", TypeInfo{ID: TypeList}, []any{1}},
		{"list of wrong", ListOf(Simple(TypeInt)), []any{"x"}},
		{"too deep", deep, deepVal},
		{"unknown type", TypeInfo{ID: 0x99}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if b, err := Marshal(tc.t, tc.v); !errors.Is(err, ErrMarshal) {
				t.Fatalf("Marshal = %x, %v; want ErrMarshal", b, err)
			}
		})
	}
}

func TestUnmarshalErrors(t *testing.T) {
	deep := Simple(TypeInt)
	deepWire := mustHex(t, "00000004 00000001")
	for i := 0; i < 40; i++ {
		deep = ListOf(deep)
		deepWire = append(AppendInt(AppendInt(nil, 1), int32(len(deepWire))), deepWire...)
	}
	tests := []struct {
		name string
		t    TypeInfo
		wire string
	}{
		{"int short", Simple(TypeInt), "000001"},
		{"bigint long", Simple(TypeBigint), "000000000000000001"},
		{"uuid short", Simple(TypeUUID), "00"},
		{"timeuuid v4", Simple(TypeTimeUUID), "6ba7b8109dad41d180b400c04fd430c8"},
		{"inet 5", Simple(TypeInet), "0102030405"},
		{"ascii high", Simple(TypeASCII), "ff"},
		{"text bad utf8", Simple(TypeVarchar), "ff"},
		{"decimal short", Simple(TypeDecimal), "00000001"},
		{"time negative", Simple(TypeTime), "ffffffffffffffff"},
		{"duration truncated", Simple(TypeDuration), "02ff"},
		{"duration trailing", Simple(TypeDuration), "00000000"},
		{"duration months overflow", Simple(TypeDuration), "f8ffffffffff 00 00"},
		{"duration mixed signs", Simple(TypeDuration), "02 00 01"},
		{"list lying count", ListOf(Simple(TypeInt)), "7fffffff"},
		{"list negative count", ListOf(Simple(TypeInt)), "ffffffff"},
		{"list lying element", ListOf(Simple(TypeInt)), "00000001 00000010 00"},
		{"list trailing", ListOf(Simple(TypeInt)), "00000000 00"},
		{"list bad element", ListOf(Simple(TypeInt)), "00000001 00000001 00"},
		{"map lying count", MapOf(Simple(TypeInt), Simple(TypeInt)), "00100000 00000000"},
		{"tuple trailing", TypeInfo{ID: TypeTuple, Elems: []TypeInfo{Simple(TypeInt)}}, "00000004 00000001 00"},
		{"udt trailing", TypeInfo{ID: TypeUDT, Fields: []Field{{Name: "a", Type: Simple(TypeInt)}}}, "ffffffff 00"},
		{"too deep", deep, ""},
		{"unknown type", TypeInfo{ID: 0x99}, "00"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wire := mustHex(t, tc.wire)
			if tc.name == "too deep" {
				wire = deepWire
			}
			if v, err := Unmarshal(tc.t, wire); !errors.Is(err, ErrUnmarshal) {
				t.Fatalf("Unmarshal = %#v, %v; want ErrUnmarshal", v, err)
			}
		})
	}
}

func TestVint(t *testing.T) {
	for _, n := range []int64{0, 1, -1, 63, -64, 64, 1 << 20, -(1 << 40), math.MaxInt64, math.MinInt64, math.MaxInt32} {
		b := appendVint(nil, n)
		got, used := readVint(b)
		if got != n || used != len(b) {
			t.Fatalf("vint %d: encoded %x, read %d using %d", n, b, got, used)
		}
	}
}

func TestDecimalString(t *testing.T) {
	tests := []struct {
		d    Decimal
		want string
	}{
		{Decimal{Unscaled: big.NewInt(-12340), Scale: 3}, "-12.340"},
		{Decimal{Unscaled: big.NewInt(5), Scale: 3}, "0.005"},
		{Decimal{Unscaled: big.NewInt(5), Scale: -2}, "500"},
		{Decimal{}, "0"},
	}
	for _, tc := range tests {
		if got := tc.d.String(); got != tc.want {
			t.Errorf("%v/%d: got %q; want %q", tc.d.Unscaled, tc.d.Scale, got, tc.want)
		}
	}
}

func TestUUID(t *testing.T) {
	const s = "123e4567-e89b-12d3-a456-426614174000"
	u, err := ParseUUID(strings.ToUpper(s))
	if err != nil {
		t.Fatal(err)
	}
	if got := FormatUUID(u); got != s {
		t.Fatalf("FormatUUID = %q; want %q", got, s)
	}
	for _, bad := range []string{"", s[:35], s + "0", strings.Replace(s, "-", "x", 1), strings.Replace(s, "e", "g", 1)} {
		if _, err := ParseUUID(bad); !errors.Is(err, ErrBadUUID) {
			t.Errorf("ParseUUID(%q) err = %v", bad, err)
		}
	}
}

func TestTimeUUID(t *testing.T) {
	at := time.Date(2024, 1, 2, 3, 4, 5, 678900, time.UTC)
	u := NewTimeUUID(at)
	if v := u[6] >> 4; v != 1 {
		t.Fatalf("version %d", v)
	}
	if u[8]&0xc0 != 0x80 {
		t.Fatalf("variant bits %02x", u[8])
	}
	if got := TimeUUIDTime(u); !got.Equal(at) {
		t.Fatalf("TimeUUIDTime = %v; want %v", got, at)
	}
	old := time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := TimeUUIDTime(makeTimeUUID(uint64(old.Unix()*1e7+uuidEpochOffset), 0, [6]byte{})); !got.Equal(old) {
		t.Fatalf("pre-1970 TimeUUIDTime = %v", got)
	}
	if _, err := Marshal(Simple(TypeTimeUUID), u); err != nil {
		t.Fatal(err)
	}

	// The same instant, asked for many times and from many goroutines, still gives unique
	// UUIDs whose timestamps increase.
	const n, workers = 1000, 8
	out := make(chan [16]byte, n*workers)
	done := make(chan struct{})
	for w := 0; w < workers; w++ {
		go func() {
			for i := 0; i < n; i++ {
				out <- NewTimeUUID(at)
			}
			done <- struct{}{}
		}()
	}
	for w := 0; w < workers; w++ {
		<-done
	}
	close(out)
	seen := map[[16]byte]bool{}
	for u := range out {
		if seen[u] {
			t.Fatalf("duplicate %s", FormatUUID(u))
		}
		seen[u] = true
	}
	a, b := NewTimeUUID(at), NewTimeUUID(at.Add(-time.Hour))
	if !TimeUUIDTime(b).After(TimeUUIDTime(a)) {
		t.Fatalf("timestamps went back: %v then %v", TimeUUIDTime(a), TimeUUIDTime(b))
	}
}
