package cql

import (
	"fmt"
	"strings"
)

// TypeID is a CQL [option] type id.
type TypeID uint16

// Type ids of protocol v4.
const (
	TypeCustom    TypeID = 0x0000
	TypeASCII     TypeID = 0x0001
	TypeBigint    TypeID = 0x0002
	TypeBlob      TypeID = 0x0003
	TypeBoolean   TypeID = 0x0004
	TypeCounter   TypeID = 0x0005
	TypeDecimal   TypeID = 0x0006
	TypeDouble    TypeID = 0x0007
	TypeFloat     TypeID = 0x0008
	TypeInt       TypeID = 0x0009
	TypeTimestamp TypeID = 0x000B
	TypeUUID      TypeID = 0x000C
	TypeVarchar   TypeID = 0x000D
	TypeVarint    TypeID = 0x000E
	TypeTimeUUID  TypeID = 0x000F
	TypeInet      TypeID = 0x0010
	TypeDate      TypeID = 0x0011
	TypeTime      TypeID = 0x0012
	TypeSmallint  TypeID = 0x0013
	TypeTinyint   TypeID = 0x0014
	TypeDuration  TypeID = 0x0015
	TypeList      TypeID = 0x0020
	TypeMap       TypeID = 0x0021
	TypeSet       TypeID = 0x0022
	TypeUDT       TypeID = 0x0030
	TypeTuple     TypeID = 0x0031
)

// TypeInfo describes a CQL type. Collections carry their element types; the zero value is
// the custom type with an empty class name.
type TypeInfo struct {
	ID     TypeID
	Custom string // class name of a custom type

	// Elem is the element type of a list or set, and the value type of a map.
	Elem *TypeInfo
	// Key is the key type of a map.
	Key *TypeInfo

	// UDT fields.
	Keyspace string
	Name     string
	Fields   []Field

	// Tuple element types.
	Elems []TypeInfo
}

// Field is a named field of a user-defined type.
type Field struct {
	Name string
	Type TypeInfo
}

var typeNames = map[TypeID]string{
	TypeASCII: "ascii", TypeBigint: "bigint", TypeBlob: "blob", TypeBoolean: "boolean",
	TypeCounter: "counter", TypeDecimal: "decimal", TypeDouble: "double", TypeFloat: "float",
	TypeInt: "int", TypeTimestamp: "timestamp", TypeUUID: "uuid", TypeVarchar: "text",
	TypeVarint: "varint", TypeTimeUUID: "timeuuid", TypeInet: "inet", TypeDate: "date",
	TypeTime: "time", TypeSmallint: "smallint", TypeTinyint: "tinyint", TypeDuration: "duration",
}

// String returns the CQL spelling of the type, such as "map<text, int>", as it appears in
// system_schema.columns.type.
func (t TypeInfo) String() string {
	switch t.ID {
	case TypeCustom:
		return "'" + t.Custom + "'"
	case TypeList, TypeSet:
		name := "list"
		if t.ID == TypeSet {
			name = "set"
		}
		if t.Elem == nil {
			return name + "<?>"
		}
		return name + "<" + t.Elem.String() + ">"
	case TypeMap:
		if t.Elem == nil || t.Key == nil {
			return "map<?, ?>"
		}
		return "map<" + t.Key.String() + ", " + t.Elem.String() + ">"
	case TypeUDT:
		return t.Name
	case TypeTuple:
		parts := make([]string, len(t.Elems))
		for i, e := range t.Elems {
			parts[i] = e.String()
		}
		return "tuple<" + strings.Join(parts, ", ") + ">"
	}
	if n, ok := typeNames[t.ID]; ok {
		return n
	}
	return fmt.Sprintf("type(0x%04x)", uint16(t.ID))
}

// Simple returns the TypeInfo of a non-collection type.
func Simple(id TypeID) TypeInfo { return TypeInfo{ID: id} }

// ListOf returns list<elem>.
func ListOf(elem TypeInfo) TypeInfo { return TypeInfo{ID: TypeList, Elem: &elem} }

// SetOf returns set<elem>.
func SetOf(elem TypeInfo) TypeInfo { return TypeInfo{ID: TypeSet, Elem: &elem} }

// MapOf returns map<key, value>.
func MapOf(key, value TypeInfo) TypeInfo { return TypeInfo{ID: TypeMap, Key: &key, Elem: &value} }

// maxTypeDepth bounds nesting so that a hostile [option] cannot recurse without end.
const maxTypeDepth = 16

// TypeInfo reads an [option] describing a type.
func (d *Decoder) TypeInfo() TypeInfo { return d.typeInfo(0) }

func (d *Decoder) typeInfo(depth int) TypeInfo {
	if depth > maxTypeDepth {
		d.fail()
		return TypeInfo{}
	}
	t := TypeInfo{ID: TypeID(d.Short())}
	if d.err != nil {
		return TypeInfo{}
	}
	switch t.ID {
	case TypeCustom:
		t.Custom = d.String()
	case TypeList, TypeSet:
		e := d.typeInfo(depth + 1)
		t.Elem = &e
	case TypeMap:
		k := d.typeInfo(depth + 1)
		v := d.typeInfo(depth + 1)
		t.Key, t.Elem = &k, &v
	case TypeUDT:
		t.Keyspace = d.String()
		t.Name = d.String()
		n := int(d.Short())
		if n*4 > d.Len() {
			d.fail()
			return TypeInfo{}
		}
		// A user type's fields have distinct names: two of one name could not be told
		// apart in a value.
		names := make(map[string]struct{}, n)
		for i := 0; i < n && d.err == nil; i++ {
			name := d.String()
			if _, dup := names[name]; dup {
				d.fail()
				return TypeInfo{}
			}
			names[name] = struct{}{}
			t.Fields = append(t.Fields, Field{Name: name, Type: d.typeInfo(depth + 1)})
		}
	case TypeTuple:
		n := int(d.Short())
		if n*2 > d.Len() {
			d.fail()
			return TypeInfo{}
		}
		for i := 0; i < n && d.err == nil; i++ {
			t.Elems = append(t.Elems, d.typeInfo(depth+1))
		}
	default:
		if _, ok := typeNames[t.ID]; !ok {
			d.fail()
			return TypeInfo{}
		}
	}
	return t
}

// AppendTypeInfo appends t as an [option].
func AppendTypeInfo(b []byte, t TypeInfo) []byte {
	b = AppendShort(b, uint16(t.ID))
	switch t.ID {
	case TypeCustom:
		b = AppendString(b, t.Custom)
	case TypeList, TypeSet:
		b = AppendTypeInfo(b, derefType(t.Elem))
	case TypeMap:
		b = AppendTypeInfo(b, derefType(t.Key))
		b = AppendTypeInfo(b, derefType(t.Elem))
	case TypeUDT:
		b = AppendString(b, t.Keyspace)
		b = AppendString(b, t.Name)
		b = AppendShort(b, uint16(len(t.Fields)))
		for _, f := range t.Fields {
			b = AppendTypeInfo(AppendString(b, f.Name), f.Type)
		}
	case TypeTuple:
		b = AppendShort(b, uint16(len(t.Elems)))
		for _, e := range t.Elems {
			b = AppendTypeInfo(b, e)
		}
	}
	return b
}

func derefType(t *TypeInfo) TypeInfo {
	if t == nil {
		return Simple(TypeBlob)
	}
	return *t
}

// Error codes of ERROR messages.
const (
	ErrCodeServer          int32 = 0x0000
	ErrCodeProtocol        int32 = 0x000A
	ErrCodeBadCredentials  int32 = 0x0100
	ErrCodeUnavailable     int32 = 0x1000
	ErrCodeOverloaded      int32 = 0x1001
	ErrCodeBootstrapping   int32 = 0x1002
	ErrCodeTruncate        int32 = 0x1003
	ErrCodeWriteTimeout    int32 = 0x1100
	ErrCodeReadTimeout     int32 = 0x1200
	ErrCodeReadFailure     int32 = 0x1300
	ErrCodeFunctionFailure int32 = 0x1400
	ErrCodeWriteFailure    int32 = 0x1500
	ErrCodeSyntax          int32 = 0x2000
	ErrCodeUnauthorized    int32 = 0x2100
	ErrCodeInvalid         int32 = 0x2200
	ErrCodeConfig          int32 = 0x2300
	ErrCodeAlreadyExists   int32 = 0x2400
	ErrCodeUnprepared      int32 = 0x2500
)

// SkipTypeInfo reads an [option] describing a type, as TypeInfo does, without building the
// TypeInfo, so that a reader of one field of a result can step over its column specs
// without allocating. It accepts the type ids and the nesting that TypeInfo accepts; unlike
// TypeInfo it does not check that a user type's field names are distinct, which does not
// change where the option ends.
func (d *Decoder) SkipTypeInfo() { d.skipTypeInfo(0) }

func (d *Decoder) skipTypeInfo(depth int) {
	if depth > maxTypeDepth {
		d.fail()
		return
	}
	id := TypeID(d.Short())
	if d.err != nil {
		return
	}
	switch id {
	case TypeCustom:
		d.StringBytes()
	case TypeList, TypeSet:
		d.skipTypeInfo(depth + 1)
	case TypeMap:
		d.skipTypeInfo(depth + 1)
		d.skipTypeInfo(depth + 1)
	case TypeUDT:
		d.StringBytes()
		d.StringBytes()
		for n := d.Short(); n > 0 && d.err == nil; n-- {
			d.StringBytes()
			d.skipTypeInfo(depth + 1)
		}
	case TypeTuple:
		for n := d.Short(); n > 0 && d.err == nil; n-- {
			d.skipTypeInfo(depth + 1)
		}
	default:
		if !simpleType(id) {
			d.fail()
		}
	}
}

// simpleType reports whether id is one of the types without parameters, the keys of
// typeNames; a range test, since a map lookup per column would be most of the cost of
// skipping a result's metadata. 0x000A was text before protocol v3.
func simpleType(id TypeID) bool { return TypeASCII <= id && id <= TypeDuration && id != 0x000A }
