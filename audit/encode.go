package audit

import (
	"strconv"
	"time"
)

// encoder writes records as Record.AppendJSON does, for the file sink's writer, at a
// fraction of its cost: a sink's records come in the order they were made and mostly
// share their second and their strings (the node, a connection's source and user, a
// statement's text, its keyspace and table), so the encoder keeps the last second's
// "2006-01-02T15:04:05" and zone, and each field's last value with its quoted JSON, and
// copies those rather than format or escape them again. The zero value is ready. It is
// not safe for concurrent use: each sink's writer has its own.
type encoder struct {
	// sec and loc are the second and location of prefix and zone.
	sec    int64
	loc    *time.Location
	prefix []byte // the date and time to the second, as RFC 3339 writes them
	zone   []byte // "Z" or "+hh:mm"
	fields [numFields]quoted
}

// The strings of a Record, in the order AppendJSON writes them.
const (
	fNode = iota
	fSource
	fUsername
	fCategory
	fOperation
	fKeyspace
	fTable
	fConsistency
	fBatchID
	numFields
)

// quoted is a field's last value and its JSON string.
type quoted struct {
	s    string
	json []byte
	set  bool
}

// append appends r's line, without the newline: the bytes of r.AppendJSON.
func (e *encoder) append(b []byte, r *Record) []byte {
	b = append(b, `{"event_time":"`...)
	b = e.appendTime(b, r.EventTime)
	b = append(b, `","node":`...)
	b = e.field(b, fNode, r.Node)
	b = append(b, `,"source":`...)
	b = e.field(b, fSource, r.Source)
	b = append(b, `,"username":`...)
	b = e.field(b, fUsername, r.Username)
	b = append(b, `,"category":`...)
	b = e.field(b, fCategory, r.Category)
	b = append(b, `,"operation":`...)
	b = e.field(b, fOperation, r.Operation)
	b = append(b, `,"keyspace_name":`...)
	b = e.field(b, fKeyspace, r.Keyspace)
	b = append(b, `,"table_name":`...)
	b = e.field(b, fTable, r.Table)
	b = append(b, `,"consistency":`...)
	b = e.field(b, fConsistency, r.Consistency)
	if r.Error {
		b = append(b, `,"error":true,"error_code":`...)
	} else {
		b = append(b, `,"error":false,"error_code":`...)
	}
	b = strconv.AppendInt(b, int64(r.ErrorCode), 10)
	if r.BatchID != "" {
		b = append(b, `,"batch_id":`...)
		b = e.field(b, fBatchID, r.BatchID)
	}
	return append(b, '}')
}

// field appends s as a JSON string, copied from the last one of field i when s is the
// same (a comparison that stops at once for the same string: its pointer).
func (e *encoder) field(b []byte, i int, s string) []byte {
	q := &e.fields[i]
	if !q.set || q.s != s {
		q.s, q.json, q.set = s, appendString(q.json[:0], s), true
	}
	return append(b, q.json...)
}

// appendTime appends t as time.RFC3339Nano formats it.
func (e *encoder) appendTime(b []byte, t time.Time) []byte {
	sec, loc := t.Unix(), t.Location()
	if sec != e.sec || loc != e.loc {
		e.sec, e.loc = sec, loc
		e.prefix = t.AppendFormat(e.prefix[:0], "2006-01-02T15:04:05")
		e.zone = t.AppendFormat(e.zone[:0], "Z07:00")
	}
	b = append(b, e.prefix...)
	if ns := t.Nanosecond(); ns != 0 {
		// Nine digits, then the trailing zeros cut, as RFC3339Nano's .999999999 does.
		var d [10]byte
		d[0] = '.'
		for i := 9; i > 0; i-- {
			d[i] = byte('0' + ns%10)
			ns /= 10
		}
		n := len(d)
		for d[n-1] == '0' {
			n--
		}
		b = append(b, d[:n]...)
	}
	return append(b, e.zone...)
}
