package logs

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

const testTimeFormat = "2006-01-02T15:04:05.000Z07:00"

// sessionEvent logs a line like the slowlog's for a sampled session.
func sessionEvent(l zerolog.Logger) {
	l.Info().
		Str("session_id", "fd1ca90e-edcb-11f1-9577-175a80fbdf2f").
		Time("started_at", time.Date(2026, 12, 1, 21, 13, 0, 0, time.UTC)).
		Int64("duration_us", 224).
		Str("mode", "sampled").
		Str("client", "127.0.0.1:49664").
		Str("coordinator", "127.0.0.1:29500").
		Str("command", "EXECUTE").
		Str("request", "Execute CQL3 prepared query").
		Dict("parameters", zerolog.Dict().
			Str("consistency_level", "LOCAL_ONE").
			Str("keyspace", "keyspace1").
			Str("page_size", "5000").
			Str("param[0]", "<redacted: 10 bytes>").
			Str("param[1]", "<redacted: 34 bytes>").
			Str("query", `INSERT INTO keyspace1.standard1 (key, "C0", "C1") VALUES (?, ?, ?) -- a\b & <c>`)).
		Int("events", 8).
		Msg("traced query")
}

// loggedEvents returns events as zerolog writes them, with every kind of field.
func loggedEvents(tb testing.TB) [][]byte {
	tb.Helper()
	var out [][]byte
	capture := func(log func(zerolog.Logger)) {
		var buf bytes.Buffer
		log(zerolog.New(&buf).With().Timestamp().Str("logger", "slowlog").Logger())
		out = append(out, bytes.Clone(buf.Bytes()))
	}
	capture(sessionEvent)
	capture(func(l zerolog.Logger) {
		l.Warn().Err(errors.New("dial node: connection refused")).Str("sink", "cql").Uint64("errors", 4).Msg("sink write failed")
	})
	capture(func(l zerolog.Logger) {
		l.Error().Str("error", "shadowed by Err").Err(errors.New("boom \"quoted\"\n")).Msg("")
	})
	capture(func(l zerolog.Logger) { l.Debug().Int("stream", 7).Msg("request") })
	capture(func(l zerolog.Logger) { l.Trace().Bool("ok", true).Float64("p", 0.01).Msg("frame") })
	capture(func(l zerolog.Logger) { l.Log().Str("k", "v").Msg("no level") })
	capture(func(l zerolog.Logger) {
		l.Info().Str("k", "a b").Str("u", "héllo\u2028").Str("c", "tab\there").Bytes("b", []byte{0xff, 'x'}).Msg("strings")
	})
	capture(func(l zerolog.Logger) {
		l.Info().Strs("list", []string{"a", "b c"}).Ints("n", []int{1, -2}).Interface("m", map[string]any{"z": 1, "a": []int{1}}).Msg("nested")
	})
	capture(func(l zerolog.Logger) {
		l.Info().Dict("d", zerolog.Dict().Str("b", "1").Str("a", "2")).Dict("e", zerolog.Dict()).Msg("unsorted dict")
	})
	capture(func(l zerolog.Logger) {
		l.Info().Dict("d", zerolog.Dict().Str("a", "1").Str("a", "2")).Str("x", "1").Str("x", "2").Msg("duplicates")
	})
	capture(func(l zerolog.Logger) {
		l.Info().RawJSON("raw", []byte(`{"a": [1, {"b": null}], "c": 1.5e3}`)).Dur("d", time.Millisecond).Msg("raw")
	})
	capture(func(l zerolog.Logger) { l.Info().Str("message", "field named message").Send() })
	capture(func(l zerolog.Logger) { l.Info().Caller().Msg("with caller") })
	capture(func(l zerolog.Logger) { l.Info().Msg("") })
	return out
}

// oddEvents are events zerolog does not write, which the writer must render as zerolog's
// writer does, or fail as it does.
var oddEvents = []string{
	`{}`,
	`{"level":"info"}`,
	`{"time":"","message":"empty time"}`,
	`{"time":12345,"level":"info","message":"unix time"}`,
	`{"time":"not a time","level":"bogus","message":"x"}`,
	`{"level":"","message":"empty level"}`,
	`{"level":"6","message":"numeric level"}`,
	`{"level":null,"message":null,"time":null}`,
	`{"level":"info","message":42}`,
	`{"level":"info", "message":"spaces"}`,
	`{"level":"info","message":"trailing"} garbage`,
	`{"level":"info","a\u0062":"escaped name"}`,
	`{"level":"info","d":{"a\"":1,"aA":2}}`,
	`{"level":"info","d":{"b":1,"a":2}}`,
	`{"level":"info","n":-0,"f":1E+2,"t":true,"z":null}`,
	`{"level":"info","s":"\u00e9\ud83d\ude00","bad":"\x"}`,
	`{"level":"info","s":"` + "\xff" + `"}`,
	`{"level":"info","n":01}`,
	`{"level":"info","d":{x}}`,
	`{"level":"info","a":[1,2,]}`,
	`{"error":"","":""}`,
	`{"s":{""},"s":""}`,
	`{"s":"\x","s":""}`,
	`{"level":"info","s":"\u0041","e":"\u0041"}`,
	`not json`,
	`{"level":"info"`,
	``,
}

// TestConsoleWriterMatchesZerolog checks the writer against zerolog.ConsoleWriter, byte for
// byte, with and without colours, on events that zerolog writes and on odd ones.
func TestConsoleWriterMatchesZerolog(t *testing.T) {
	events := loggedEvents(t)
	for _, e := range oddEvents {
		events = append(events, []byte(e))
	}
	for _, noColor := range []bool{true, false} {
		for _, e := range events {
			assertSameLine(t, e, noColor)
		}
	}
	t.Setenv("NO_COLOR", "1")
	for _, e := range events {
		assertSameLine(t, e, false)
	}
}

// TestConsoleWriterFormatsItself checks that the lines tracecar writes most, a session's
// and a warning's, are formatted by the writer itself and not handed to zerolog's.
func TestConsoleWriterFormatsItself(t *testing.T) {
	w := newConsoleWriter(io.Discard, true, testTimeFormat)
	for _, e := range loggedEvents(t)[:2] {
		if _, ok := w.format(&consoleState{}, e); !ok {
			t.Errorf("format(%s) left the event to zerolog's writer", e)
		}
	}
}

func assertSameLine(t *testing.T, event []byte, noColor bool) {
	t.Helper()
	var got, want bytes.Buffer
	gn, gerr := newConsoleWriter(&got, noColor, testTimeFormat).Write(event)
	wn, werr := zerolog.ConsoleWriter{Out: &want, NoColor: noColor, TimeFormat: testTimeFormat}.Write(event)
	if got.String() != want.String() || gn != wn || (gerr == nil) != (werr == nil) {
		t.Errorf("event %q, noColor %v:\ngot  %q, %d, %v\nwant %q, %d, %v", event, noColor, got.String(), gn, gerr, want.String(), wn, werr)
	}
}

func FuzzConsoleWriter(f *testing.F) {
	for _, e := range loggedEvents(f) {
		f.Add(e)
	}
	for _, e := range oddEvents {
		f.Add([]byte(e))
	}
	f.Fuzz(func(t *testing.T, event []byte) {
		assertSameLine(t, event, true)
		assertSameLine(t, event, false)
	})
}

// BenchmarkConsoleSession is a sampled session's slowlog line in the console format.
func BenchmarkConsoleSession(b *testing.B) {
	l := zerolog.New(newConsoleWriter(io.Discard, true, testTimeFormat)).With().Timestamp().Str("logger", "slowlog").Logger()
	b.ReportAllocs()
	for b.Loop() {
		sessionEvent(l)
	}
}

// BenchmarkZerologConsoleSession is the same line through zerolog.ConsoleWriter.
func BenchmarkZerologConsoleSession(b *testing.B) {
	l := zerolog.New(zerolog.ConsoleWriter{Out: io.Discard, NoColor: true, TimeFormat: testTimeFormat}).
		With().Timestamp().Str("logger", "slowlog").Logger()
	b.ReportAllocs()
	for b.Loop() {
		sessionEvent(l)
	}
}

// BenchmarkConsoleWrite is the writer alone, on a sampled session's event.
func BenchmarkConsoleWrite(b *testing.B) {
	e := loggedEvents(b)[0]
	w := newConsoleWriter(io.Discard, true, testTimeFormat)
	b.ReportAllocs()
	for b.Loop() {
		w.Write(e)
	}
}
