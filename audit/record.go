// Package audit is tracecar's audit log: one record per statement, login and admin
// change, filtered by category, keyspace, table and user, and written to sinks (JSON
// lines, syslog, ScyllaDB's audit.audit_log table) without losing a record silently.
package audit

import (
	"context"
	"strconv"
	"time"
	"unicode/utf8"
)

// Category is one of ScyllaDB's audit_categories.
type Category uint8

// The categories, named as ScyllaDB's audit_categories.
const (
	AUTH Category = iota + 1
	DDL
	DCL
	DML
	QUERY
	ADMIN
)

var categoryNames = [...]string{AUTH: "AUTH", DDL: "DDL", DCL: "DCL", DML: "DML", QUERY: "QUERY", ADMIN: "ADMIN"}

// String gives the category's name, as ScyllaDB writes it.
func (c Category) String() string {
	if int(c) < len(categoryNames) && categoryNames[c] != "" {
		return categoryNames[c]
	}
	return "UNKNOWN"
}

// Record is one audit record. Its fields and JSON names follow ScyllaDB's audit.audit_log,
// plus error_code and, for a BATCH's children, batch_id.
type Record struct {
	EventTime   time.Time `json:"event_time"`
	Node        string    `json:"node"`
	Source      string    `json:"source"`
	Username    string    `json:"username"`
	Category    string    `json:"category"`
	Operation   string    `json:"operation"`
	Keyspace    string    `json:"keyspace_name"`
	Table       string    `json:"table_name"`
	Consistency string    `json:"consistency"`
	Error       bool      `json:"error"`
	ErrorCode   int32     `json:"error_code"`
	BatchID     string    `json:"batch_id,omitempty"`
}

// Sink receives records in batches, from one goroutine, in the order they were made.
// The queue in front of it applies the policy (block or drop); a Sink may block.
//
// When Write returns an error, the Log reports the sink as failing (in /readyz and the
// status) and calls Write again, with the same records, until it succeeds: a sink that
// wrote some of them before failing must skip those on the retry (the file sink truncates
// what it wrote of a failed batch), or the records are duplicated. Sync is called every
// Config.Sync while something was written since the last, never per record.
type Sink interface {
	// Name names the sink in the status, /readyz and metrics: "file", "syslog", "table".
	Name() string
	// Write delivers records; it may buffer them until Sync.
	Write(ctx context.Context, recs []Record) error
	// Sync makes what was written durable (fsync for a file, a flush for a stream).
	Sync(ctx context.Context) error
	// Close syncs and releases the sink.
	Close(ctx context.Context) error
}

// numCategories sizes the per-category counters: the categories and, at 0, the unknown.
const numCategories = int(ADMIN) + 1

// categoryIndex returns the counter of a category's name, 0 for an unknown one.
func categoryIndex(name string) int {
	for i := 1; i < len(categoryNames); i++ {
		if categoryNames[i] == name {
			return i
		}
	}
	return 0
}

// AppendJSON appends r as one line of JSON, without the newline: the bytes an
// encoding/json Encoder with SetEscapeHTML(false) gives (the same names, order and
// escaping; <, > and & as they are, so that an operation reads and greps as it was
// written), at a fraction of its cost, for the file sink's writer.
func (r *Record) AppendJSON(b []byte) []byte {
	b = append(b, `{"event_time":"`...)
	b = r.EventTime.AppendFormat(b, time.RFC3339Nano)
	b = appendField(b, `","node":`, r.Node)
	b = appendField(b, `,"source":`, r.Source)
	b = appendField(b, `,"username":`, r.Username)
	b = appendField(b, `,"category":`, r.Category)
	b = appendField(b, `,"operation":`, r.Operation)
	b = appendField(b, `,"keyspace_name":`, r.Keyspace)
	b = appendField(b, `,"table_name":`, r.Table)
	b = appendField(b, `,"consistency":`, r.Consistency)
	b = append(b, `,"error":`...)
	b = strconv.AppendBool(b, r.Error)
	b = append(b, `,"error_code":`...)
	b = strconv.AppendInt(b, int64(r.ErrorCode), 10)
	if r.BatchID != "" {
		b = appendField(b, `,"batch_id":`, r.BatchID)
	}
	return append(b, '}')
}

func appendField(b []byte, name, v string) []byte {
	return appendString(append(b, name...), v)
}

const hexDigits = "0123456789abcdef"

// plainASCII says which ASCII bytes a JSON string holds as they are: one load per byte
// where three comparisons were, in the file sink's hottest loop.
var plainASCII = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendString appends s as a JSON string escaped as encoding/json escapes it without
// HTML escaping: control characters, U+2028 and U+2029, and invalid UTF-8 as U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if plainASCII[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
