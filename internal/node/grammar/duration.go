package grammar

import (
	"errors"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// The duration type: months, days and nanoseconds, each a signed vint in Cassandra's
// encoding (VIntCoding: zigzag, then the count of extra bytes in the first byte's high bits).

const (
	nanosPerMicro  = int64(1000)
	nanosPerMilli  = 1000 * nanosPerMicro
	NanosPerSecond = 1000 * nanosPerMilli
	NanosPerMinute = 60 * NanosPerSecond
	NanosPerHour   = 60 * NanosPerMinute
)

type duration struct{ Months, Days, Nanos int64 }

func AppendVint(b []byte, v int64) []byte {
	u := uint64(v<<1) ^ uint64(v>>63)
	size := (639 - bits.LeadingZeros64(u|1)*9) >> 6
	if size == 1 {
		return append(b, byte(u))
	}
	extra := size - 1
	var buf [9]byte
	for i := extra; i >= 0; i-- {
		buf[i] = byte(u)
		u >>= 8
	}
	buf[0] |= ^byte(0xff >> extra)
	return append(b, buf[:size]...)
}

func ReadVint(b []byte) (int64, []byte, bool) {
	if len(b) == 0 {
		return 0, nil, false
	}
	first := b[0]
	extra := bits.LeadingZeros8(^first)
	if extra > 8 || len(b) < 1+extra {
		return 0, nil, false
	}
	u := uint64(first & (0xff >> extra))
	if extra == 8 {
		u = 0
	}
	for i := 1; i <= extra; i++ {
		u = u<<8 | uint64(b[i])
	}
	return int64(u>>1) ^ -int64(u&1), b[1+extra:], true
}

func EncDuration(d duration) []byte {
	b := AppendVint(nil, d.Months)
	b = AppendVint(b, d.Days)
	return AppendVint(b, d.Nanos)
}

func DecDuration(b []byte) (duration, bool) {
	var d duration
	var ok bool
	if d.Months, b, ok = ReadVint(b); !ok {
		return d, false
	}
	if d.Days, b, ok = ReadVint(b); !ok {
		return d, false
	}
	if d.Nanos, b, ok = ReadVint(b); !ok {
		return d, false
	}
	return d, len(b) == 0 && d.Months >= math.MinInt32 && d.Months <= math.MaxInt32 && d.Days >= math.MinInt32 && d.Days <= math.MaxInt32
}

// sameSign checks Cassandra's rule that the three parts share a sign.
func (d duration) SameSign() bool {
	return (d.Months <= 0 && d.Days <= 0 && d.Nanos <= 0) || (d.Months >= 0 && d.Days >= 0 && d.Nanos >= 0)
}

// String spells the duration as Cassandra's Duration.toString: 1y2mo3d4h5m6s7ms8us9ns.
func (d duration) String() string {
	var b strings.Builder
	if d.Months < 0 || d.Days < 0 || d.Nanos < 0 {
		b.WriteByte('-')
	}
	part := func(v, div int64, unit string) int64 {
		if v == 0 || v < div {
			return v
		}
		b.WriteString(strconv.FormatInt(v/div, 10))
		b.WriteString(unit)
		return v % div
	}
	abs := func(v int64) int64 {
		if v < 0 {
			return -v
		}
		return v
	}
	part(part(abs(d.Months), 12, "y"), 1, "mo")
	part(abs(d.Days), 1, "d")
	if d.Nanos != 0 {
		r := part(abs(d.Nanos), NanosPerHour, "h")
		r = part(r, NanosPerMinute, "m")
		r = part(r, NanosPerSecond, "s")
		r = part(r, nanosPerMilli, "ms")
		r = part(r, nanosPerMicro, "us")
		part(r, 1, "ns")
	}
	return b.String()
}

var errDuration = errors.New("bad duration")

// durationUnits are the units of the standard format, with what one of them adds.
var durationUnits = map[string]duration{
	"y": {Months: 12}, "mo": {Months: 1}, "w": {Days: 7}, "d": {Days: 1}, "h": {Nanos: NanosPerHour},
	"m": {Nanos: NanosPerMinute}, "s": {Nanos: NanosPerSecond}, "ms": {Nanos: nanosPerMilli},
	"us": {Nanos: nanosPerMicro}, "µs": {Nanos: nanosPerMicro}, "ns": {Nanos: 1},
}

// parseDuration reads a duration literal: 1h30m (units y, mo, w, d, h, m, s, ms, us or µs,
// ns, in any case), or ISO 8601's PnYnMnDTnHnMnS and PnW; a leading '-' negates it.
func ParseDuration(s string) (duration, error) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var d duration
	var err error
	if len(s) > 0 && (s[0] == 'P' || s[0] == 'p') {
		d, err = parseISODuration(s[1:])
	} else {
		d, err = parseUnitDuration(strings.ToLower(s))
	}
	if err != nil {
		return d, err
	}
	if neg {
		d = duration{-d.Months, -d.Days, -d.Nanos}
	}
	return d, nil
}

func parseUnitDuration(s string) (duration, error) {
	var d duration
	if s == "" {
		return d, errDuration
	}
	for s != "" {
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		j := i
		for j < len(s) && !(s[j] >= '0' && s[j] <= '9') {
			j++
		}
		n, err := strconv.ParseInt(s[:i], 10, 64)
		u, ok := durationUnits[s[i:j]]
		if err != nil || !ok {
			return d, errDuration
		}
		d = duration{d.Months + n*u.Months, d.Days + n*u.Days, d.Nanos + n*u.Nanos}
		s = s[j:]
	}
	return d, nil
}

func parseISODuration(s string) (duration, error) {
	var d duration
	s = strings.ToUpper(s)
	if strings.HasSuffix(s, "W") {
		n, err := strconv.ParseInt(s[:len(s)-1], 10, 64)
		if err != nil {
			return d, errDuration
		}
		return duration{Days: 7 * n}, nil
	}
	date, clock, hasTime := strings.Cut(s, "T")
	units := map[byte]duration{'Y': {Months: 12}, 'M': {Months: 1}, 'D': {Days: 1}}
	read := func(part string, units map[byte]duration) error {
		for part != "" {
			i := 0
			for i < len(part) && part[i] >= '0' && part[i] <= '9' {
				i++
			}
			if i == 0 || i == len(part) {
				return errDuration
			}
			n, err := strconv.ParseInt(part[:i], 10, 64)
			u, ok := units[part[i]]
			if err != nil || !ok {
				return errDuration
			}
			d = duration{d.Months + n*u.Months, d.Days + n*u.Days, d.Nanos + n*u.Nanos}
			part = part[i+1:]
		}
		return nil
	}
	if err := read(date, units); err != nil {
		return d, err
	}
	if hasTime {
		if clock == "" {
			return d, errDuration
		}
		if err := read(clock, map[byte]duration{'H': {Nanos: NanosPerHour}, 'M': {Nanos: NanosPerMinute}, 'S': {Nanos: NanosPerSecond}}); err != nil {
			return d, err
		}
	}
	if date == "" && !hasTime {
		return d, errDuration
	}
	return d, nil
}

// isISODuration reports whether an identifier-shaped token is an ISO 8601 duration, which
// the lexer reads as a name: P1Y2M, PT2H, P3W.
func isISODuration(s string) bool {
	if len(s) < 3 || s[0] != 'P' && s[0] != 'p' {
		return false
	}
	_, err := parseISODuration(s[1:])
	return err == nil
}
