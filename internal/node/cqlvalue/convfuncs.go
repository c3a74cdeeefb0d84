package cqlvalue

import (
	"strings"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/grammar"
)

// Cassandra 4.1's native scalar functions of one value that convert it: the time
// conversions (toTimestamp, toDate, toUnixTimestamp, and the deprecated dateOf and
// unixTimestampOf), and the blob conversions (textAsBlob, blobAsInt, ...). They apply to a
// column in a selection (SELECT dateOf(id) FROM t) and to a term (SET ts = dateOf(now())).

// gregorianOffset is the number of 100ns intervals between 1582-10-15 and 1970-01-01.
const gregorianOffset = 0x01B21DD213814000

// convResult returns the result type of the conversion fn of a value of type arg, or ok
// false when fn is not one, or an error when arg is not a type it takes.
func ConvResult(fn string, arg cql.TypeInfo, provided string) (cql.TypeInfo, bool, error) {
	bad := func() (cql.TypeInfo, bool, error) {
		if sigs := convOverloads[fn]; sigs != "" {
			return cql.TypeInfo{}, true, Invalidf("Invalid call to function system.%s, none of its type signatures match (known type signatures: %s)", fn, sigs)
		}
		return cql.TypeInfo{}, true, Invalidf("Type error: %s cannot be passed as argument 0 of function system.%s of type %s", provided, fn, convArgText(fn))
	}
	switch fn {
	case "dateof", "unixtimestampof":
		if arg.ID != cql.TypeTimeUUID {
			return bad()
		}
		if fn == "dateof" {
			return cql.TypeInfo{ID: cql.TypeTimestamp}, true, nil
		}
		return cql.TypeInfo{ID: cql.TypeBigint}, true, nil
	case "totimestamp", "todate", "tounixtimestamp":
		ok := arg.ID == cql.TypeTimeUUID || arg.ID == cql.TypeDate || arg.ID == cql.TypeTimestamp
		if !ok || fn == "totimestamp" && arg.ID == cql.TypeTimestamp || fn == "todate" && arg.ID == cql.TypeDate {
			return bad()
		}
		return cql.TypeInfo{ID: map[string]cql.TypeID{"totimestamp": cql.TypeTimestamp, "todate": cql.TypeDate, "tounixtimestamp": cql.TypeBigint}[fn]}, true, nil
	case "mintimeuuid", "maxtimeuuid":
		if arg.ID != cql.TypeTimestamp {
			return bad()
		}
		return cql.TypeInfo{ID: cql.TypeTimeUUID}, true, nil
	}
	if t, ok := blobAsType(fn); ok {
		if arg.ID != cql.TypeBlob {
			return bad()
		}
		return t, true, nil
	}
	if t, ok := typeAsBlob(fn); ok {
		if arg.ID != t.ID {
			return bad()
		}
		return cql.TypeInfo{ID: cql.TypeBlob}, true, nil
	}
	return cql.TypeInfo{}, false, nil
}

// convOverloads lists the signatures of the overloaded conversions, as 4.1's error for a
// call that matches none of them does.
var convOverloads = map[string]string{
	"todate":          "system.todate : (timeuuid) -> date, system.todate : (timestamp) -> date",
	"totimestamp":     "system.totimestamp : (timeuuid) -> timestamp, system.totimestamp : (date) -> timestamp",
	"tounixtimestamp": "system.tounixtimestamp : (timeuuid) -> bigint, system.tounixtimestamp : (timestamp) -> bigint, system.tounixtimestamp : (date) -> bigint",
}

// convArgText names the argument type a conversion takes, for its type errors.
func convArgText(fn string) string {
	switch fn {
	case "dateof", "unixtimestampof":
		return "timeuuid"
	case "mintimeuuid", "maxtimeuuid":
		return "timestamp"
	case "totimestamp", "todate", "tounixtimestamp":
		return "timeuuid"
	}
	if _, ok := blobAsType(fn); ok {
		return "blob"
	}
	if t, ok := typeAsBlob(fn); ok {
		return t.String()
	}
	return "?"
}

// blobAsType returns X of blobAsX.
func blobAsType(fn string) (cql.TypeInfo, bool) {
	name, ok := strings.CutPrefix(fn, "blobas")
	if !ok || name == "blob" {
		return cql.TypeInfo{}, false
	}
	id, ok := grammar.SimpleTypes[name]
	return cql.TypeInfo{ID: id}, ok
}

// typeAsBlob returns X of XAsBlob.
func typeAsBlob(fn string) (cql.TypeInfo, bool) {
	name, ok := strings.CutSuffix(fn, "asblob")
	if !ok || name == "blob" {
		return cql.TypeInfo{}, false
	}
	id, ok := grammar.SimpleTypes[name]
	return cql.TypeInfo{ID: id}, ok
}

// convMillis reads a timeuuid, date or timestamp as milliseconds since the epoch.
func convMillis(arg cql.TypeInfo, b []byte) (int64, bool) {
	switch arg.ID {
	case cql.TypeTimeUUID:
		if len(b) != 16 {
			return 0, false
		}
		return int64(uuidTime(b)-gregorianOffset) / 10000, true
	case cql.TypeDate:
		d, ok := Int32Value(b)
		return (int64(uint32(d)) - 1<<31) * 86400000, ok
	}
	return Int64Value(b)
}

// applyConv computes the conversion fn of b, a value of type arg, whose result is of type
// ret. A null or malformed value gives null; a blob conversion checks the value.
func ApplyConv(fn string, arg, ret cql.TypeInfo, b []byte) ([]byte, error) {
	if b == nil {
		return nil, nil
	}
	if ret.ID == cql.TypeBlob || arg.ID == cql.TypeBlob {
		if err := Validate(ret, b, fn); err != nil {
			return nil, Invalidf("In call to function system.%s, value 0x%x is not a valid binary representation for type %s", fn, b, ret.String())
		}
		return b, nil
	}
	ms, ok := convMillis(arg, b)
	if !ok {
		return nil, nil
	}
	switch ret.ID {
	case cql.TypeDate:
		days := ms / 86400000
		if ms < 0 && ms%86400000 != 0 {
			days--
		}
		return EncInt(int32(uint32(days + 1<<31))), nil
	case cql.TypeTimeUUID:
		return timeUUIDBound(ms, fn == "mintimeuuid"), nil
	}
	return EncBigint(ms), nil
}

// timeUUIDBound is minTimeuuid or maxTimeuuid of ms.
func timeUUIDBound(ms int64, min bool) []byte {
	ts := uint64(ms*10000) + gregorianOffset
	u := make([]byte, 16)
	u[0], u[1], u[2], u[3] = byte(ts>>24), byte(ts>>16), byte(ts>>8), byte(ts)
	u[4], u[5] = byte(ts>>40), byte(ts>>32)
	u[6], u[7] = byte(ts>>56)&0x0F|0x10, byte(ts>>48)
	fill := byte(0x7f)
	if min {
		fill = 0x80
	}
	for i := 8; i < 16; i++ {
		u[i] = fill
	}
	return u
}

// convArgType is the type a conversion reads a term as (a literal or a bound value): for the
// time conversions, a timeuuid, as their first overload takes.
func ConvArgType(fn string) (cql.TypeInfo, bool) {
	switch fn {
	case "dateof", "unixtimestampof", "totimestamp", "todate", "tounixtimestamp":
		return cql.TypeInfo{ID: cql.TypeTimeUUID}, true
	case "mintimeuuid", "maxtimeuuid":
		return cql.TypeInfo{ID: cql.TypeTimestamp}, true
	}
	if _, ok := blobAsType(fn); ok {
		return cql.TypeInfo{ID: cql.TypeBlob}, true
	}
	if t, ok := typeAsBlob(fn); ok {
		return t, true
	}
	return cql.TypeInfo{}, false
}
