package engine

import (
	"math"
	"testing"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/storage"
)

func TestCompareValues(t *testing.T) {
	dec := func(lit string) []byte {
		b, ok := cqlvalue.EncDecimal(lit)
		if !ok {
			t.Fatalf("bad decimal %s", lit)
		}
		return b
	}
	huge := append(cqlvalue.EncInt(2147483647), 1)
	tests := []struct {
		name string
		typ  cql.TypeID
		a, b []byte
		want int
	}{
		{"int sign", cql.TypeInt, cqlvalue.EncInt(-1), cqlvalue.EncInt(1), -1},
		{"bigint", cql.TypeBigint, cqlvalue.EncBigint(5), cqlvalue.EncBigint(3), 1},
		{"varint widths", cql.TypeVarint, []byte{0xff}, []byte{0x00, 0x80}, -1},
		{"decimal", cql.TypeDecimal, dec("1.50"), dec("1.5"), 0},
		{"decimal magnitude", cql.TypeDecimal, dec("-10"), dec("-9.99"), -1},
		{"decimal hostile scale", cql.TypeDecimal, huge, dec("1"), -1},
		{"double nan", cql.TypeDouble, cqlvalue.EncDouble(1), cqlvalue.EncDouble(nan()), -1},
		{"text", cql.TypeVarchar, []byte("a"), []byte("b"), -1},
		{"empty first", cql.TypeInt, []byte{}, cqlvalue.EncInt(-5), -1},
		{"timeuuid by time", cql.TypeTimeUUID, timeUUID(2, 0xff), timeUUID(3, 0x00), -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := cqlvalue.CompareValues(cql.TypeInfo{ID: tc.typ}, tc.a, tc.b)
			if got != tc.want {
				t.Errorf("got %d; want %d", got, tc.want)
			}
		})
	}
}

func nan() float64 { return math.NaN() }

func timeUUID(ts uint32, node byte) []byte {
	u := make([]byte, 16)
	u[0], u[1], u[2], u[3] = byte(ts>>24), byte(ts>>16), byte(ts>>8), byte(ts)
	u[6] = 0x10
	u[8] = 0x80
	u[15] = node
	return u
}

// fuzzTypes are the types FuzzValues reads its bytes as.
var fuzzTypes = []cql.TypeInfo{
	cql.ListOf(cql.Simple(cql.TypeInt)), cql.SetOf(cql.Simple(cql.TypeVarchar)),
	cql.MapOf(cql.Simple(cql.TypeVarchar), cql.Simple(cql.TypeDouble)), cql.Simple(cql.TypeVarint),
	cql.Simple(cql.TypeTimeUUID), cql.Simple(cql.TypeDecimal), cql.Simple(cql.TypeUUID),
	cql.Simple(cql.TypeFloat), cql.Simple(cql.TypeInet), cql.Simple(cql.TypeASCII),
	cql.MapOf(cql.Simple(cql.TypeInt), cql.ListOf(cql.Simple(cql.TypeBlob))),
	cql.Simple(cql.TypeDuration), {ID: cql.TypeTuple, Elems: []cql.TypeInfo{cql.Simple(cql.TypeInt), cql.Simple(cql.TypeVarchar)}},
	{ID: cql.TypeUDT, Keyspace: "ks", Name: "u", Fields: []cql.Field{{Name: "a", Type: cql.Simple(cql.TypeInt)},
		{Name: "b", Type: cql.ListOf(cql.Simple(cql.TypeVarchar))}}},
	cql.Simple(cql.TypeDate), cql.Simple(cql.TypeTimestamp), cql.Simple(cql.TypeTime),
}

// FuzzValues checks that validation, comparison, collection and field updates, field
// selection and JSON never panic on bound bytes.
func FuzzValues(f *testing.F) {
	f.Add(uint8(0), []byte{0, 0, 0, 1, 0, 0, 0, 1, 7}, []byte{0, 0, 0, 0})
	f.Add(uint8(5), []byte{0x7f, 0xff, 0xff, 0xff, 1}, []byte{0, 0, 0, 2, 9})
	f.Fuzz(func(t *testing.T, ti uint8, a, b []byte) { fuzzValue(ti, a, b) })
}

func fuzzValue(ti uint8, a, b []byte) {
	typ := fuzzTypes[int(ti)%len(fuzzTypes)]
	_ = cqlvalue.Validate(typ, a, "c")
	_ = cqlvalue.CompareValues(typ, a, b)
	_ = cqlvalue.NormalizeCollection(typ, a)
	if cqlvalue.IsCollection(typ) {
		col := &storage.Column{Name: "c", Typ: typ}
		for _, k := range []storage.CellOpKind{storage.CellAppend, storage.CellPrepend, storage.CellRemove, storage.CellSetKey, storage.CellDelKey} {
			_, _ = storage.CollectionOp(col, &storage.CellOp{Kind: k, V: b, Key: cqlvalue.EncInt(0)}, a)
		}
	}
	if cqlvalue.IsUDT(typ) {
		_, _ = storage.CollectionOp(&storage.Column{Name: "c", Typ: typ}, &storage.CellOp{Kind: storage.CellSetField, V: b, Field: uint16(ti % 2)}, a)
	}
	// JSON renders whatever was bound, and reads back what it rendered.
	if cqlvalue.Validate(typ, a, "c") == nil {
		if v, err := cqlvalue.DecodeJSON(cqlvalue.ToJSON(typ, a)); err == nil {
			_, _ = cqlvalue.FromJSON(v, typ, 0)
		}
	}
	_ = fieldOf(a, []int{int(ti) % 3})
}
