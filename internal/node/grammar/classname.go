package grammar

import (
	"strconv"
	"strings"
)

// The built-in types by their class names, as Cassandra's TypeParser reads a quoted type:
// CREATE TABLE t (k int PRIMARY KEY, v 'org.apache.cassandra.db.marshal.Int32Type').

const MarshalPackage = "org.apache.cassandra.db.marshal."

// classTypes maps the marshal classes of the native types to their CQL names.
var classTypes = map[string]string{
	"AsciiType": "ascii", "LongType": "bigint", "BytesType": "blob", "BooleanType": "boolean",
	"CounterColumnType": "counter", "SimpleDateType": "date", "DecimalType": "decimal", "DoubleType": "double",
	"DurationType": "duration", "FloatType": "float", "InetAddressType": "inet", "Int32Type": "int",
	"ShortType": "smallint", "UTF8Type": "text", "TimeType": "time", "TimestampType": "timestamp",
	"DateType": "timestamp", "TimeUUIDType": "timeuuid", "ByteType": "tinyint", "UUIDType": "uuid",
	"IntegerType": "varint",
}

// customClasses are the marshal classes with no CQL name: Cassandra shows them as custom
// types, by their class names, in system_schema and in result metadata.
var customClasses = map[string]bool{"LexicalUUIDType": true}

// otherClasses are 4.1's other marshal classes: real, but not types the node stores.
var otherClasses = map[string]bool{"CompositeType": true, "DynamicCompositeType": true, "EmptyType": true,
	"UserType": true, "PartitionerDefinedOrder": true, "LocalByPartionerType": true}

// classNameType parses a type given by its class name, with parameters for collections,
// tuples and frozen types (ListType(Int32Type), FrozenType(MapType(...)), ...). The error
// is Cassandra's, naming the class it does not know.
func classNameType(s string) (*TypeRef, string) {
	cp := classParser{src: s}
	r, msg := cp.parse(0)
	if msg == "" && cp.pos != len(cp.src) {
		msg = "Syntax error parsing '" + s + "' at char " + strconv.Itoa(cp.pos) + ": unexpected character '" + cp.src[cp.pos:cp.pos+1] + "'"
	}
	if msg != "" {
		if strings.HasPrefix(msg, "the type ") {
			return nil, strings.ToUpper(msg[:1]) + msg[1:]
		}
		if strings.HasPrefix(msg, "Unable") {
			return nil, "Error setting type " + s + ": " + msg
		}
		return nil, "Cannot parse type " + s + ": " + msg
	}
	return r, ""
}

type classParser struct {
	src string
	pos int
}

func (cp *classParser) skipBlank() {
	for cp.pos < len(cp.src) && (cp.src[cp.pos] == ' ' || cp.src[cp.pos] == '\t' || cp.src[cp.pos] == '\n') {
		cp.pos++
	}
}

func (cp *classParser) name() string {
	cp.skipBlank()
	start := cp.pos
	for cp.pos < len(cp.src) {
		c := cp.src[cp.pos]
		if c == '(' || c == ')' || c == ',' || c == ' ' || c == ':' || c == '=' {
			break
		}
		cp.pos++
	}
	return cp.src[start:cp.pos]
}

func (cp *classParser) parse(depth int) (*TypeRef, string) {
	if depth > MaxNesting {
		return nil, "type nesting too deep"
	}
	full := cp.name()
	if full == "" {
		return nil, "Syntax error parsing '" + cp.src + "' at char " + strconv.Itoa(cp.pos) + ": unexpected end of string"
	}
	short := full
	if !strings.Contains(full, ".") {
		full = MarshalPackage + full
	} else if strings.HasPrefix(full, MarshalPackage) {
		short = full[len(MarshalPackage):]
	} else {
		return nil, "Unable to find abstract-type class '" + full + "'"
	}
	var args []*TypeRef
	cp.skipBlank()
	if cp.pos < len(cp.src) && cp.src[cp.pos] == '(' {
		cp.pos++
		for {
			a, msg := cp.parse(depth + 1)
			if msg != "" {
				return nil, msg
			}
			args = append(args, a)
			cp.skipBlank()
			if cp.pos < len(cp.src) && cp.src[cp.pos] == ',' {
				cp.pos++
				continue
			}
			break
		}
		if cp.pos >= len(cp.src) || cp.src[cp.pos] != ')' {
			return nil, "Syntax error parsing '" + cp.src + "' at char " + strconv.Itoa(cp.pos) + ": unexpected end of string"
		}
		cp.pos++
	}
	if n, ok := classTypes[short]; ok && args == nil {
		return &TypeRef{Name: n}, ""
	}
	if customClasses[short] && args == nil {
		return &TypeRef{Name: full, Custom: true}, ""
	}
	want := map[string]int{"ListType": 1, "SetType": 1, "MapType": 2, "FrozenType": 1, "ReversedType": 1, "TupleType": -1}
	n, ok := want[short]
	if !ok {
		if otherClasses[short] {
			return nil, "the type " + full + " is not supported by the embedded node"
		}
		return nil, "Unable to find abstract-type class '" + full + "'"
	}
	if n > 0 && len(args) != n || len(args) == 0 {
		return nil, "Invalid number of type parameters for " + short + ": " + strconv.Itoa(len(args))
	}
	switch short {
	case "FrozenType":
		args[0].Frozen = true
		return args[0], ""
	case "ReversedType":
		return args[0], ""
	case "ListType":
		return &TypeRef{Name: "list", Args: args}, ""
	case "SetType":
		return &TypeRef{Name: "set", Args: args}, ""
	case "MapType":
		return &TypeRef{Name: "map", Args: args}, ""
	}
	return &TypeRef{Name: "tuple", Args: args}, ""
}
