package logs

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// consoleWriter turns zerolog's JSON events into the lines that zerolog.ConsoleWriter writes,
// byte for byte, with the same settings. zerolog's writer decodes every event into a map
// with encoding/json and encodes its nested values again, which costs tens of µs a line:
// a sampled session's log line cost more than the rest of its recording. This one scans
// the event once and copies what needs no change, such as the flat JSON object that a
// zerolog Dict makes of a session's parameters. An event it does not handle itself (a
// caller field, a timestamp that is not a string, anything unusual in the JSON) goes to
// zerolog.ConsoleWriter, whose output is the reference. It assumes, as tracecar does, that
// zerolog.InterfaceMarshalFunc is zerolog's default. It is safe for concurrent use, as its
// Out is.
type consoleWriter struct {
	out        io.Writer
	noColor    bool
	timeFormat string
	slow       zerolog.ConsoleWriter
}

func newConsoleWriter(out io.Writer, noColor bool, timeFormat string) *consoleWriter {
	return &consoleWriter{
		out: out, noColor: noColor, timeFormat: timeFormat,
		slow: zerolog.ConsoleWriter{Out: out, NoColor: noColor, TimeFormat: timeFormat},
	}
}

// consoleState is the scratch space of one Write.
type consoleState struct {
	line   []byte
	fields []consoleField
}

// consoleField is one top-level member of an event: its name, which has no escapes, and
// its value as raw JSON.
type consoleField struct {
	name, value []byte
	canonical   bool // an object or array that encoding/json writes back as it is
}

// maxPooledLine bounds the lines whose buffer is used again, so that one huge line does not
// stay in memory.
const maxPooledLine = 64 << 10

var consolePool = sync.Pool{New: func() any {
	return &consoleState{line: make([]byte, 0, 512), fields: make([]consoleField, 0, 16)}
}}

// ANSI colours, as zerolog's console writer uses them.
const (
	colorBold     = 1
	colorRed      = 31
	colorCyan     = 36
	colorDarkGray = 90
)

// Write writes the line of the event p, which is one JSON object, and returns len(p).
func (w *consoleWriter) Write(p []byte) (int, error) {
	st := consolePool.Get().(*consoleState)
	line, ok := w.format(st, p)
	if !ok {
		consolePool.Put(st)
		return w.slow.Write(p)
	}
	_, err := w.out.Write(line)
	if cap(line) <= maxPooledLine {
		st.line = line[:0]
		consolePool.Put(st)
	}
	return len(p), err
}

// format appends the line of p to st.line, or reports false to leave p to zerolog's writer.
func (w *consoleWriter) format(st *consoleState, p []byte) ([]byte, bool) {
	fields, ok := splitObject(st.fields[:0], p)
	st.fields = fields[:0]
	if !ok {
		return nil, false
	}
	h, fields, ok := splitHeader(lastOfEachName(fields))
	if !ok {
		return nil, false
	}
	color := !w.noColor && os.Getenv("NO_COLOR") == ""
	b, ok := w.appendHeader(st.line[:0], h, color)
	if !ok {
		return nil, false
	}
	if len(b) > 0 && len(fields) > 0 {
		b = append(b, ' ')
	}
	if b, ok = appendFields(b, fields, color); !ok {
		return nil, false
	}
	return append(b, '\n'), true
}

// lastOfEachName sorts fields by name and keeps the last of those with one name, in place:
// encoding/json keeps the last of members with one name, as a map does; a stable sort
// keeps them in order, so the last of each run wins.
func lastOfEachName(fields []consoleField) []consoleField {
	slices.SortStableFunc(fields, func(a, b consoleField) int { return bytes.Compare(a.name, b.name) })
	kept := fields[:0]
	for i, f := range fields {
		if i+1 < len(fields) && bytes.Equal(f.name, fields[i+1].name) {
			continue
		}
		kept = append(kept, f)
	}
	return kept
}

// consoleHeader holds the raw values of the fields a line starts with, nil when absent.
type consoleHeader struct {
	ts, level, msg []byte
}

// splitHeader takes the timestamp, level and message out of fields, in place, and returns
// them and the other fields; it reports false for an event with a caller field.
func splitHeader(fields []consoleField) (consoleHeader, []consoleField, bool) {
	var h consoleHeader
	rest := fields[:0]
	for _, f := range fields {
		switch string(f.name) {
		case zerolog.TimestampFieldName:
			h.ts = f.value
		case zerolog.LevelFieldName:
			h.level = f.value
		case zerolog.MessageFieldName:
			h.msg = f.value
		case zerolog.CallerFieldName:
			return h, nil, false
		default:
			rest = append(rest, f)
		}
	}
	return h, rest, true
}

// appendHeader appends the parts a line starts with: the time, the level and the message.
// A part that renders empty is left out, with its space.
func (w *consoleWriter) appendHeader(b []byte, h consoleHeader, color bool) ([]byte, bool) {
	ts := "<nil>"
	if h.ts != nil {
		s, ok := plainString(h.ts)
		if !ok {
			return nil, false
		}
		ts = w.formatTime(s)
	}
	b = appendPart(b, ts, colorDarkGray, color)
	level := ""
	if h.level == nil {
		b = appendPart(b, "???", 0, color)
	} else {
		s, ok := plainString(h.level)
		if !ok {
			return nil, false
		}
		level = s
		lvl, _ := zerolog.ParseLevel(s)
		if fl, ok := zerolog.FormattedLevels[lvl]; ok {
			b = appendPart(b, fl, zerolog.LevelColors[lvl], color)
		} else {
			b = appendPart(b, stripLevel(s), 0, color)
		}
	}
	if h.msg == nil || string(h.msg) == "null" {
		return b, true
	}
	msg, ok := plainString(h.msg)
	if !ok {
		return nil, false
	}
	if msg != "" {
		c := 0
		switch level {
		case zerolog.LevelInfoValue, zerolog.LevelWarnValue, zerolog.LevelErrorValue,
			zerolog.LevelFatalValue, zerolog.LevelPanicValue:
			c = colorBold
		}
		b = appendPart(b, msg, c, color)
	}
	return b, true
}

// formatTime writes timestamp s in the writer's time format (time.Kitchen by default), or
// as it is when it does not parse.
func (w *consoleWriter) formatTime(s string) string {
	t, err := time.ParseInLocation(zerolog.TimeFieldFormat, s, time.Local)
	if err != nil {
		return s
	}
	layout := w.timeFormat
	if layout == "" {
		layout = time.Kitchen
	}
	return t.In(time.Local).Format(layout)
}

// appendFields appends the fields, space-separated: the error first, then the others by
// name.
func appendFields(b []byte, fields []consoleField, color bool) ([]byte, bool) {
	if i := slices.IndexFunc(fields, func(f consoleField) bool { return string(f.name) == zerolog.ErrorFieldName }); i >= 0 {
		f := fields[i]
		fields = fields[:i+copy(fields[i:], fields[i+1:])]
		var ok bool
		if b, ok = appendField(b, f, true, color); !ok {
			return nil, false
		}
		if len(fields) > 0 {
			b = append(b, ' ')
		}
	}
	for i, f := range fields {
		var ok bool
		if b, ok = appendField(b, f, false, color); !ok {
			return nil, false
		}
		if i < len(fields)-1 {
			b = append(b, ' ')
		}
	}
	return b, true
}

// appendField appends name=value, coloured as zerolog colours a field, or an error field.
func appendField(b []byte, f consoleField, isErr, color bool) ([]byte, bool) {
	if color {
		b = append(b, "\x1b["...)
		b = strconv.AppendInt(b, colorCyan, 10)
		b = append(b, 'm')
	}
	b = append(b, f.name...)
	b = append(b, '=')
	if color {
		b = append(b, "\x1b[0m"...)
	}
	if isErr && color {
		b = append(b, "\x1b[31m\x1b[1m"...)
	}
	var ok bool
	if b, ok = appendValue(b, f); !ok {
		return nil, false
	}
	if isErr && color {
		b = append(b, "\x1b[0m\x1b[0m"...)
	}
	return b, true
}

// appendValue appends a field's value as zerolog's console writer prints it: a string bare,
// or quoted in Go syntax when it needs it; a number as written; anything else as
// zerolog.InterfaceMarshalFunc encodes what encoding/json decodes of it.
func appendValue(b []byte, f consoleField) ([]byte, bool) {
	switch v := f.value; v[0] {
	case '"':
		if inner := v[1 : len(v)-1]; isPlain(inner) {
			if needsQuote(inner) {
				return strconv.AppendQuote(b, string(inner)), true
			}
			return append(b, inner...), true
		}
		s, ok := plainString(v)
		if !ok {
			return nil, false
		}
		if needsQuote(s) {
			return strconv.AppendQuote(b, s), true
		}
		return append(b, s...), true
	case '{', '[':
		if f.canonical {
			return append(b, v...), true
		}
		var x any
		d := json.NewDecoder(bytes.NewReader(v))
		d.UseNumber()
		if err := d.Decode(&x); err != nil {
			return nil, false
		}
		enc, err := zerolog.InterfaceMarshalFunc(x)
		if err != nil {
			return nil, false
		}
		return append(b, enc...), true
	}
	// A number, true, false or null: encoding/json gives back what it read.
	return append(b, f.value...), true
}

// plainString returns the Go string of the JSON string v.
func plainString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	inner := v[1 : len(v)-1]
	if isPlain(inner) {
		return string(inner), true
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", false
	}
	return s, true
}

// isPlain reports whether the inside of a JSON string is printable ASCII without escapes,
// so that it is its own value.
func isPlain(s []byte) bool {
	for _, c := range s {
		if c < 0x20 || c > 0x7e || c == '\\' {
			return false
		}
	}
	return true
}

// needsQuote is zerolog's rule for quoting a string field in a console line.
func needsQuote[T string | []byte](s T) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == ' ' || c == '\\' || c == '"' {
			return true
		}
	}
	return false
}

// stripLevel is zerolog's rendering of a level it has no short name for.
func stripLevel(s string) string {
	if s == "" {
		return "???"
	}
	if len(s) > 3 {
		s = s[:3]
	}
	return strings.ToUpper(s)
}

// appendPart appends s, after a space unless it is the first, in colour c, unless it
// renders empty.
func appendPart(b []byte, s string, c int, color bool) []byte {
	start := len(b)
	if start > 0 {
		b = append(b, ' ')
	}
	b = colorize(b, s, c, color)
	if len(b) == start+1 && start > 0 {
		return b[:start]
	}
	return b
}

// colorize appends s, in ANSI colour c when color is set and c is not 0.
func colorize(b []byte, s string, c int, color bool) []byte {
	if !color || c == 0 {
		return append(b, s...)
	}
	b = append(b, "\x1b["...)
	b = strconv.AppendInt(b, int64(c), 10)
	b = append(b, 'm')
	b = append(b, s...)
	return append(b, "\x1b[0m"...)
}

// isCanonical reports whether the JSON object or array v is what encoding/json (without
// HTML escaping) writes for the value it decodes from v: compact, an object's names in
// increasing order and without duplicates, and only strings, numbers, true, false and null
// inside, whose strings are printable ASCII with no escapes but \" and \\ (which both
// encoders write alike). zerolog's Dict of sorted names, such as a session's parameters, is.
func isCanonical(v []byte) bool {
	obj := v[0] == '{'
	closing := byte(']')
	if obj {
		closing = '}'
	}
	i := 1
	if i < len(v) && v[i] == closing {
		return i+1 == len(v)
	}
	var prev []byte
	for first := true; ; first = false {
		if obj {
			// A name with escapes may sort otherwise once decoded.
			name, n, ok := canonicalString(v[i:])
			if !ok || bytes.IndexByte(name, '\\') >= 0 || !first && bytes.Compare(prev, name) >= 0 {
				return false
			}
			prev, i = name, i+n
			if i >= len(v) || v[i] != ':' {
				return false
			}
			i++
		}
		n := canonicalScalar(v[i:])
		if n == 0 {
			return false
		}
		i += n
		if i >= len(v) {
			return false
		}
		switch v[i] {
		case ',':
			i++
		case closing:
			return i+1 == len(v)
		default:
			return false
		}
	}
}

// canonicalString returns the raw inside of the JSON string at the start of v and its
// length, quotes included, when its only escapes are \" and \\ and the rest is printable
// ASCII.
func canonicalString(v []byte) ([]byte, int, bool) {
	if len(v) == 0 || v[0] != '"' {
		return nil, 0, false
	}
	for i := 1; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"':
			return v[1:i], i + 1, true
		case c == '\\':
			if i+1 >= len(v) || v[i+1] != '"' && v[i+1] != '\\' {
				return nil, 0, false
			}
			i++
		case c < 0x20 || c > 0x7e:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// canonicalScalar returns the length of the string, number, true, false or null at the
// start of v that encoding/json writes back as it is, or 0.
func canonicalScalar(v []byte) int {
	if len(v) == 0 {
		return 0
	}
	switch v[0] {
	case '"':
		_, n, ok := canonicalString(v)
		if !ok {
			return 0
		}
		return n
	case 't':
		return literal(v, "true")
	case 'f':
		return literal(v, "false")
	case 'n':
		return literal(v, "null")
	}
	return number(v)
}

func literal(v []byte, lit string) int {
	if bytes.HasPrefix(v, []byte(lit)) {
		return len(lit)
	}
	return 0
}

// digits returns the end of the run of decimal digits at v[i:], or 0 when there is none.
func digits(v []byte, i int) int {
	start := i
	for i < len(v) && '0' <= v[i] && v[i] <= '9' {
		i++
	}
	if i == start {
		return 0
	}
	return i
}

// number returns the length of the JSON number at the start of v, or 0.
func number(v []byte) int {
	i := 0
	if i < len(v) && v[i] == '-' {
		i++
	}
	switch {
	case i < len(v) && v[i] == '0':
		i++
	case i < len(v) && '1' <= v[i] && v[i] <= '9':
		i = digits(v, i)
	default:
		return 0
	}
	if i < len(v) && v[i] == '.' {
		if i = digits(v, i+1); i == 0 {
			return 0
		}
	}
	if i < len(v) && (v[i] == 'e' || v[i] == 'E') {
		i++
		if i < len(v) && (v[i] == '+' || v[i] == '-') {
			i++
		}
		if i = digits(v, i); i == 0 {
			return 0
		}
	}
	return i
}

// splitObject appends the members of the compact JSON object that p starts with, as
// zerolog writes an event, and reports false for anything else: whitespace inside, an
// empty member name or one with escapes, or bad JSON. What follows the object must be whitespace, as
// for encoding/json's Decoder it may be anything; zerolog ends an event with a newline.
func splitObject(fields []consoleField, p []byte) ([]consoleField, bool) {
	if len(p) < 2 || p[0] != '{' {
		return fields, false
	}
	i := 1
	if p[i] == '}' {
		return fields, onlySpace(p[i+1:])
	}
	for {
		// zerolog's writer drops a member named "" when the event has an error.
		name, n, ok := canonicalString(p[i:])
		if !ok || len(name) == 0 || bytes.IndexByte(name, '\\') >= 0 {
			return fields, false
		}
		i += n
		if i >= len(p) || p[i] != ':' {
			return fields, false
		}
		i++
		n = valueLen(p[i:])
		if n == 0 {
			return fields, false
		}
		f := consoleField{name: name, value: p[i : i+n]}
		// Every value is checked, also one that a later member of its name replaces:
		// encoding/json fails on either.
		switch v := f.value; v[0] {
		case '"':
			if !isPlain(v[1:n-1]) && !json.Valid(v) {
				return fields, false
			}
		case '{', '[':
			f.canonical = isCanonical(v)
			if !f.canonical && !json.Valid(v) {
				return fields, false
			}
		}
		fields = append(fields, f)
		i += n
		if i >= len(p) {
			return fields, false
		}
		switch p[i] {
		case ',':
			i++
		case '}':
			return fields, onlySpace(p[i+1:])
		default:
			return fields, false
		}
	}
}

func onlySpace(p []byte) bool {
	for _, c := range p {
		if c != '\n' && c != ' ' && c != '\t' && c != '\r' {
			return false
		}
	}
	return true
}

// valueLen returns the length of the compact JSON value at the start of v, or 0. Of a
// string, an object or an array it finds the end only, which the caller checks.
func valueLen(v []byte) int {
	if len(v) == 0 {
		return 0
	}
	switch v[0] {
	case '"':
		return stringLen(v)
	case '{', '[':
		depth := 0
		for i := 0; i < len(v); i++ {
			switch v[i] {
			case '"':
				n := stringLen(v[i:])
				if n == 0 {
					return 0
				}
				i += n - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return 0
	}
	return canonicalScalar(v)
}

// stringLen returns the length of the JSON string at the start of v, quotes included, or 0.
func stringLen(v []byte) int {
	for i := 1; i < len(v); i++ {
		switch v[i] {
		case '"':
			return i + 1
		case '\\':
			i++
		}
	}
	return 0
}
