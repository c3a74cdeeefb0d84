package engine

import (
	"crypto/rand"
	"encoding/binary"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/grammar"
)

// compileTerm compiles t for a target of type typ; spec is the bind metadata given to a
// marker in that place.
func (c *compiler) compileTerm(t *grammar.Term, typ cql.TypeInfo, spec cql.ColumnSpec) (*expr, error) {
	return c.compileTermDepth(t, typ, spec, 0)
}

// compileTermDepth compiles t at depth levels of nesting: a marker is bound, a function
// compiled, a literal without markers encoded once, and one with markers inside kept as its
// elements' expressions.
func (c *compiler) compileTermDepth(t *grammar.Term, typ cql.TypeInfo, spec cql.ColumnSpec, depth int) (*expr, error) {
	if depth > grammar.MaxNesting {
		return nil, invalidf("literal nesting too deep")
	}
	switch t.Kind {
	case grammar.TermBind:
		col := spec.Name
		spec.Type = typ
		c.bind(t, spec)
		return &expr{kind: exBind, idx: t.Idx, typ: typ, col: col}, nil
	case grammar.TermFunc:
		return c.compileFunc(t, typ, spec, depth)
	case grammar.TermTuple, grammar.TermUDT:
		if hasMarker(t) {
			return c.compileFields(t, typ, spec, depth)
		}
	case grammar.TermList, grammar.TermSet, grammar.TermMap:
		if hasMarker(t) {
			return c.compileElems(t, typ, spec, depth)
		}
	}
	b, err := cqlvalue.Literal(t, typ, spec.Name)
	if err != nil {
		return nil, err
	}
	return &expr{kind: exConst, b: b, typ: typ, col: spec.Name}, nil
}

// compileFields compiles a tuple or user type literal with markers inside: one expression
// per component, in the type's order (a field left out stays nil).
func (c *compiler) compileFields(t *grammar.Term, typ cql.TypeInfo, spec cql.ColumnSpec, depth int) (*expr, error) {
	col := spec.Name
	x := &expr{kind: exColl, typ: typ, col: col}
	types := cqlvalue.ComponentTypes(typ)
	switch {
	case typ.ID == cql.TypeTuple && t.Kind == grammar.TermTuple:
		if len(t.Elems) > len(types) {
			return nil, invalidf("Invalid tuple literal for %s: too many elements. Type %s expects %d but got %d", col, cqlvalue.CqlTypeText(typ), len(types), len(t.Elems))
		}
		x.elems = make([]*expr, len(types))
		for i, el := range t.Elems {
			s := spec
			s.Name = col + "[" + strconv.Itoa(i) + "]"
			ex, err := c.compileTermDepth(el, types[i], s, depth+1)
			if err != nil {
				return nil, err
			}
			x.elems[i] = ex
		}
	case typ.ID == cql.TypeUDT && t.Kind == grammar.TermUDT:
		x.elems = make([]*expr, len(types))
		for i, n := range t.Names {
			f := slices.IndexFunc(typ.Fields, func(f cql.Field) bool { return f.Name == n })
			if f < 0 {
				return nil, invalidf("Unknown field '%s' in value of user defined type %s", n, typ.Name)
			}
			s := spec
			s.Name = col + "." + n
			ex, err := c.compileTermDepth(t.Elems[i], types[f], s, depth+1)
			if err != nil {
				return nil, err
			}
			x.elems[f] = ex
		}
	default:
		_, err := cqlvalue.Literal(t, typ, col)
		return nil, err
	}
	return x, nil
}

// compileElems compiles a list, set or map literal with markers inside: one expression per
// element, a map's keys and values alternating.
func (c *compiler) compileElems(t *grammar.Term, typ cql.TypeInfo, spec cql.ColumnSpec, depth int) (*expr, error) {
	col := spec.Name
	x := &expr{kind: exColl, typ: typ, col: col}
	switch {
	case typ.ID == cql.TypeList && t.Kind == grammar.TermList,
		typ.ID == cql.TypeSet && t.Kind == grammar.TermSet:
		et := cqlvalue.ElemType(typ)
		for _, el := range t.Elems {
			s := spec
			s.Name = "value(" + col + ")"
			ex, err := c.compileTermDepth(el, et, s, depth+1)
			if err != nil {
				return nil, err
			}
			x.elems = append(x.elems, ex)
		}
	case typ.ID == cql.TypeMap && t.Kind == grammar.TermMap:
		for i, k := range t.Elems {
			s := spec
			s.Name = "key(" + col + ")"
			kx, err := c.compileTermDepth(k, cqlvalue.KeyType(typ), s, depth+1)
			if err != nil {
				return nil, err
			}
			s.Name = "value(" + col + ")"
			vx, err := c.compileTermDepth(t.Vals[i], cqlvalue.ElemType(typ), s, depth+1)
			if err != nil {
				return nil, err
			}
			x.elems = append(x.elems, kx, vx)
		}
	default:
		return nil, invalidf("Invalid %s literal for %s of type %s", cqlvalue.KindName(t), col, typ.String())
	}
	return x, nil
}

func hasMarker(t *grammar.Term) bool {
	if t.Kind == grammar.TermBind {
		return true
	}
	for _, e := range t.Elems {
		if hasMarker(e) {
			return true
		}
	}
	for _, e := range t.Vals {
		if hasMarker(e) {
			return true
		}
	}
	return false
}

// generators are the native functions that make a value of nothing (now()), by name, with
// the type of the value.
var generators = map[string]cql.TypeID{"now": cql.TypeTimeUUID, "currenttimeuuid": cql.TypeTimeUUID,
	"uuid": cql.TypeUUID, "currenttimestamp": cql.TypeTimestamp, "currentdate": cql.TypeDate, "currenttime": cql.TypeTime}

// funcResult returns the result type of the native function name, a generator or a
// conversion; a user-defined function (which the node does not run) or an unknown one is
// an error.
func (c *compiler) funcResult(ks, name string) (cql.TypeID, error) {
	if rt, ok := generators[name]; ok {
		return rt, nil
	}
	if argT, ok := cqlvalue.ConvArgType(name); ok {
		ret, _, err := cqlvalue.ConvResult(name, argT, "?")
		return ret.ID, err
	}
	return 0, c.unknownFunc(ks, name)
}

// unknownFunc is the error of a call of name, which is no native function: a user-defined
// function of keyspace ks, which the node does not run, or an unknown one.
func (c *compiler) unknownFunc(ks, name string) error {
	if err := udfCall(c.sc.Keyspaces[ks], ks, name); !strings.HasPrefix(err.Error(), "Unknown") {
		return err
	}
	return invalidf("Unknown function '%s'", name)
}

// compileFunc compiles a call of a native function, whose result must fit typ: a generator,
// fromJson or a conversion.
func (c *compiler) compileFunc(t *grammar.Term, typ cql.TypeInfo, spec cql.ColumnSpec, depth int) (*expr, error) {
	x := &expr{kind: exFunc, fn: t.Name, typ: typ, col: spec.Name}
	want := func(n int) error {
		if len(t.Elems) != n {
			return invalidf("Invalid number of arguments in call to function system.%s: %d required but %d provided", t.Name, n, len(t.Elems))
		}
		return nil
	}
	rt, generator := generators[t.Name]
	switch {
	case generator: // checked below
	case t.Name == "fromjson":
		if err := want(1); err != nil {
			return nil, err
		}
		s := spec
		s.Name = "fromjson(" + spec.Name + ")"
		arg, err := c.compileTermDepth(t.Elems[0], cql.TypeInfo{ID: cql.TypeVarchar}, s, depth+1)
		if err != nil {
			return nil, err
		}
		x.args = []*expr{arg}
		if arg.kind == exConst {
			b, err := fromJSONText(arg.b, typ, spec.Name)
			if err != nil {
				return nil, err
			}
			return &expr{kind: exConst, b: b, typ: typ, col: spec.Name}, nil
		}
		return x, nil
	default:
		if argT, ok := cqlvalue.ConvArgType(t.Name); ok {
			if err := want(1); err != nil {
				return nil, err
			}
			arg, err := c.compileTermDepth(t.Elems[0], argT, spec, depth+1)
			if err != nil {
				return nil, err
			}
			ret, _, err := cqlvalue.ConvResult(t.Name, argT, "?")
			if err != nil {
				return nil, err
			}
			x.args = []*expr{arg}
			rt = ret.ID
			break
		}
		return nil, c.unknownFunc(spec.Keyspace, t.Name)
	}
	if rt != cql.TypeTimeUUID && rt != cql.TypeUUID && rt != cql.TypeDate || t.Name == "currentdate" || t.Name == "todate" {
		if len(t.Elems) > 1 {
			return nil, invalidf("Invalid number of arguments in call to function system.%s", t.Name)
		}
	}
	if rt != typ.ID && !(rt == cql.TypeTimeUUID && typ.ID == cql.TypeUUID) && !(rt == cql.TypeBigint && typ.ID == cql.TypeCounter) {
		return nil, invalidf("Type error: cannot assign result of function system.%s (type %s) to %s (type %s)", t.Name, cql.TypeInfo{ID: rt}.String(), spec.Name, typ.String())
	}
	return x, nil
}

// eval computes the value. unset reports a v4 unset bound value.
func (x *expr) eval(ex *execCtx) (b []byte, unset bool, err error) {
	switch x.kind {
	case exConst:
		return x.b, false, nil
	case exBind:
		if x.idx >= len(ex.vals) {
			return nil, false, invalidf("missing bound value for %s", x.col)
		}
		v := ex.vals[x.idx]
		if v.Unset {
			return nil, true, nil
		}
		if v.Bytes == nil {
			return nil, false, nil
		}
		if err := cqlvalue.Validate(x.typ, v.Bytes, x.col); err != nil {
			return nil, false, err
		}
		if x.typ.ID == cql.TypeSet || x.typ.ID == cql.TypeMap {
			return cqlvalue.NormalizeCollection(x.typ, v.Bytes), false, nil
		}
		return v.Bytes, false, nil
	case exColl:
		if cqlvalue.IsTupleLike(x.typ) {
			elems := make([][]byte, len(x.elems))
			for i, el := range x.elems {
				if el == nil {
					continue
				}
				b, unset, err := el.eval(ex)
				if err != nil {
					return nil, false, err
				}
				if !unset {
					elems[i] = b
				}
			}
			return cqlvalue.EncTuple(elems), false, nil
		}
		elems := make([][]byte, 0, len(x.elems))
		for _, el := range x.elems {
			b, unset, err := el.eval(ex)
			if err != nil {
				return nil, false, err
			}
			if unset || b == nil {
				return nil, false, invalidf("null or unset value is not supported inside collections (%s)", x.col)
			}
			elems = append(elems, b)
		}
		b := cqlvalue.EncCollection(elems)
		binary.BigEndian.PutUint32(b, uint32(len(elems)/cqlvalue.ElemsPerEntry(x.typ)))
		return cqlvalue.NormalizeCollection(x.typ, b), false, nil
	case exFunc:
		return x.evalFunc(ex)
	case exJSON:
		return ex.json[x.idx], ex.jsonUnset[x.idx], nil
	}
	return nil, false, invalidf("bad expression")
}

func (x *expr) evalFunc(ex *execCtx) ([]byte, bool, error) {
	var arg []byte
	if len(x.args) > 0 {
		b, unset, err := x.args[0].eval(ex)
		if err != nil || unset || b == nil {
			return nil, unset, err
		}
		arg = b
	}
	switch x.fn {
	case "now", "currenttimeuuid":
		u := cql.NewTimeUUID(ex.now)
		return u[:], false, nil
	case "uuid":
		var u [16]byte
		_, _ = rand.Read(u[:])
		u[6] = u[6]&0x0F | 0x40
		u[8] = u[8]&0x3F | 0x80
		return u[:], false, nil
	case "currenttimestamp":
		return cqlvalue.EncTimestamp(ex.now), false, nil
	case "currentdate":
		return cqlvalue.EncInt(int32(uint32(ex.now.Unix()/86400 + 1<<31))), false, nil
	case "currenttime":
		// Nanoseconds since midnight UTC.
		return cqlvalue.EncBigint(ex.now.UTC().Sub(ex.now.UTC().Truncate(24 * time.Hour)).Nanoseconds()), false, nil
	case "fromjson":
		b, err := fromJSONText(arg, x.typ, x.col)
		return b, false, err
	default:
		if len(x.args) == 1 {
			if ret, ok, _ := cqlvalue.ConvResult(x.fn, x.args[0].typ, ""); ok {
				b, err := cqlvalue.ApplyConv(x.fn, x.args[0].typ, ret, arg)
				return b, false, err
			}
		}
	}
	return nil, false, invalidf("Unknown function '%s'", x.fn)
}

// fromJSONText is fromJson(): the JSON text b as a value of type t, for column col.
func fromJSONText(b []byte, t cql.TypeInfo, col string) ([]byte, error) {
	if b == nil {
		return nil, nil
	}
	v, err := cqlvalue.DecodeJSON(string(b))
	if err != nil {
		return nil, functionFailure("system", "fromjson", []string{"text"}, "Could not decode JSON string '"+string(b)+"': "+err.Error())
	}
	out, err := cqlvalue.FromJSON(v, t, 0)
	if err != nil {
		return nil, functionFailure("system", "fromjson", []string{"text"}, err.Error())
	}
	if out != nil {
		if err := cqlvalue.Validate(t, out, col); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// functionFailure is the FunctionFailure error (0x1400) of function ks.fn(args...).
func functionFailure(ks, fn string, args []string, msg string) *cql.Error {
	extra := cql.AppendStringList(cql.AppendString(cql.AppendString(nil, ks), fn), args)
	return &cql.Error{Code: cql.ErrCodeFunctionFailure, Message: "execution of '" + ks + "." + fn + "[" + strings.Join(args, ", ") + "]' failed: " + msg, Extra: extra}
}
