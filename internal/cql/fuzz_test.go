package cql

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// The fuzz targets decode arbitrary input and, when it is accepted, check that encoding is
// stable: encode(decode(x)) decodes to a message that encodes to the same bytes again.

func fuzzVersion(v byte) byte { return V3 + v&1 }

func FuzzFrame(f *testing.F) {
	for _, s := range frameSeeds() {
		f.Add(s.frame, s.snappy)
	}
	f.Fuzz(func(t *testing.T, frame []byte, useSnappy bool) {
		h, err := ParseHeader(frame)
		if err != nil || len(frame)-HeaderSize < int(h.Length) {
			return
		}
		var c Compressor
		if h.Flags&FlagCompression != 0 {
			c = LZ4{}
			if useSnappy {
				c = Snappy{}
			}
		}
		m, p, cp, ok := decodeFrame(h, frame[HeaderSize:HeaderSize+int(h.Length)], c)
		if !ok {
			return
		}
		enc := func(m Message) []byte {
			var out []byte
			var err error
			if h.IsResponse() {
				out, err = AppendResponseFrame(nil, h, p, m, c)
			} else {
				out, err = AppendRequestFrame(nil, h, cp, m, c)
			}
			if err != nil {
				t.Fatalf("encode %#v: %v", m, err)
			}
			return out
		}
		f2 := enc(m)
		h2, err := ParseHeader(f2)
		if err != nil {
			t.Fatalf("re-encoded header: %v", err)
		}
		m2, _, _, ok := decodeFrame(h2, f2[HeaderSize:], c)
		if !ok {
			t.Fatalf("re-encoded %#v does not decode: %x", m, f2)
		}
		m3, _, _, ok := decodeFrame(h2, enc(m2)[HeaderSize:], c)
		if !ok || !reflect.DeepEqual(m2, m3) {
			t.Fatalf("unstable encoding:\n%#v\n%#v", m2, m3)
		}
	})
}

func decodeFrame(h Header, body []byte, c Compressor) (Message, ResponsePrefix, map[string][]byte, bool) {
	var err error
	if c != nil {
		if body, err = c.Decompress(nil, body); err != nil {
			return nil, ResponsePrefix{}, nil, false
		}
	}
	var p ResponsePrefix
	var cp map[string][]byte
	if h.IsResponse() {
		p, body, err = ParseResponsePrefix(h.Flags, body)
	} else {
		cp, body, err = ParseRequestPrefix(h.Flags, body)
	}
	if err != nil {
		return nil, p, cp, false
	}
	m, err := DecodeBody(h.Opcode, h.ProtoVersion(), body)
	return m, p, cp, err == nil
}

// fuzzStable decodes body with dec and checks that encoding is stable.
func fuzzStable[M Message](t *testing.T, body []byte, v byte, dec func([]byte, byte) (M, error)) {
	m1, err := dec(body, v)
	if err != nil {
		return
	}
	e1 := m1.AppendBody(nil, v)
	m2, err := dec(e1, v)
	if err != nil {
		t.Fatalf("re-encoded %#v does not decode: %v\n%x", m1, err, e1)
	}
	e2 := m2.AppendBody(nil, v)
	if !bytes.Equal(e1, e2) {
		t.Fatalf("unstable encoding of %#v:\n%x\n%x", m1, e1, e2)
	}
}

func FuzzQuery(f *testing.F) {
	for _, s := range bodySeeds(OpQuery) {
		f.Add(s.body, s.version)
	}
	f.Fuzz(func(t *testing.T, body []byte, v byte) {
		fuzzStable(t, body, fuzzVersion(v), DecodeQuery)
		if m, err := DecodeQuery(body, fuzzVersion(v)); err == nil {
			m2, err := DecodeQuery(m.AppendBody(nil, fuzzVersion(v)), fuzzVersion(v))
			if err != nil || !reflect.DeepEqual(m, m2) {
				t.Fatalf("round trip changed %#v to %#v (%v)", m, m2, err)
			}
		}
	})
}

func FuzzExecute(f *testing.F) {
	for _, s := range bodySeeds(OpExecute) {
		f.Add(s.body, s.version)
	}
	f.Fuzz(func(t *testing.T, body []byte, v byte) {
		fuzzStable(t, body, fuzzVersion(v), DecodeExecute)
	})
}

func FuzzBatch(f *testing.F) {
	for _, s := range bodySeeds(OpBatch) {
		f.Add(s.body, s.version)
	}
	f.Fuzz(func(t *testing.T, body []byte, v byte) {
		fuzzStable(t, body, fuzzVersion(v), DecodeBatch)
	})
}

func FuzzResult(f *testing.F) {
	for _, s := range bodySeeds(OpResult) {
		f.Add(s.body, s.version)
	}
	f.Fuzz(func(t *testing.T, body []byte, v byte) {
		fuzzStable(t, body, fuzzVersion(v), DecodeResult)
	})
}

func FuzzDecompress(f *testing.F) {
	for _, s := range decompressSeeds() {
		f.Add(s.frame, s.snappy)
	}
	f.Fuzz(func(t *testing.T, src []byte, useSnappy bool) {
		var c Compressor = LZ4{}
		if useSnappy {
			c = Snappy{}
		}
		out, err := c.Decompress(nil, src)
		if err != nil {
			return
		}
		if len(out) > 255*len(src)+16 {
			t.Fatalf("%d bytes from %d", len(out), len(src))
		}
		z, err := c.Compress(nil, out)
		if err != nil {
			t.Fatal(err)
		}
		again, err := c.Decompress(nil, z)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("round trip failed: %v", err)
		}
	})
}

func FuzzUnmarshal(f *testing.F) {
	for _, s := range unmarshalSeeds() {
		f.Add(s.typ, s.value)
	}
	f.Fuzz(func(t *testing.T, typ, value []byte) {
		d := NewDecoder(typ)
		ti := d.TypeInfo()
		if d.Err() != nil {
			return
		}
		v, err := Unmarshal(ti, value)
		if err != nil {
			return
		}
		m1, err := Marshal(ti, v)
		if err != nil {
			t.Fatalf("Marshal(%s, %#v) of an unmarshalled value: %v", ti, v, err)
		}
		v2, err := Unmarshal(ti, m1)
		if err != nil {
			t.Fatalf("Unmarshal(%s, %x) of a marshalled value: %v", ti, m1, err)
		}
		m2, err := Marshal(ti, v2)
		if err != nil || !bytes.Equal(m1, m2) {
			t.Fatalf("unstable %s: %x then %x (%v)", ti, m1, m2, err)
		}
	})
}

type frameSeed struct {
	name   string
	frame  []byte
	snappy bool
}

func frameSeeds() []frameSeed {
	var seeds []frameSeed
	for _, tc := range messageCases() {
		for _, v := range []byte{V3, V4} {
			h := Header{Version: v, Stream: 3}
			if isResponse(tc.msg.Opcode()) {
				h.Version |= ResponseBit
			}
			name := fmt.Sprintf("%s_v%d", tc.name, v)
			seeds = append(seeds, frameSeed{name: name, frame: AppendFrame(nil, h, tc.msg)})
			fz, _ := AppendFrameCompressed(nil, h, tc.msg, Snappy{})
			seeds = append(seeds, frameSeed{name: name + "_snappy", frame: fz, snappy: true})
		}
	}
	p := ResponsePrefix{TracingID: [16]byte{1}, HasTracingID: true, Warnings: []string{"w"},
		CustomPayload: map[string][]byte{"k": {1}}}
	h := Header{Version: V4 | ResponseBit, Flags: FlagTracing | FlagWarning | FlagCustomPayload, Stream: 9}
	fr, _ := AppendResponseFrame(nil, h, p, VoidResult{}, LZ4{})
	seeds = append(seeds, frameSeed{name: "prefixed_lz4", frame: fr})
	return seeds
}

type bodySeed struct {
	name    string
	body    []byte
	version byte
}

func bodySeeds(op Opcode) []bodySeed {
	var seeds []bodySeed
	for _, tc := range messageCases() {
		if tc.msg.Opcode() != op {
			continue
		}
		for _, v := range []byte{V3, V4} {
			seeds = append(seeds, bodySeed{name: fmt.Sprintf("%s_v%d", tc.name, v), body: tc.msg.AppendBody(nil, v), version: v})
		}
	}
	return seeds
}

func decompressSeeds() []frameSeed {
	var seeds []frameSeed
	for i, in := range [][]byte{{}, []byte("hello"), bytes.Repeat([]byte("abc"), 100), pseudoRandom(300)} {
		z, _ := LZ4{}.Compress(nil, in)
		seeds = append(seeds, frameSeed{name: fmt.Sprintf("lz4_%d", i), frame: z})
		z, _ = Snappy{}.Compress(nil, in)
		seeds = append(seeds, frameSeed{name: fmt.Sprintf("snappy_%d", i), frame: z, snappy: true})
	}
	return seeds
}

type valueSeed struct {
	name       string
	typ, value []byte
}

func unmarshalSeeds() []valueSeed {
	var seeds []valueSeed
	add := func(name string, t TypeInfo, v any) {
		b, err := Marshal(t, v)
		if err != nil {
			panic(err)
		}
		seeds = append(seeds, valueSeed{name: name, typ: AppendTypeInfo(nil, t), value: b})
	}
	add("int", Simple(TypeInt), 7)
	add("text", Simple(TypeVarchar), "héllo")
	add("varint", Simple(TypeVarint), -129)
	add("decimal", Simple(TypeDecimal), Decimal{Scale: 2})
	add("duration", Simple(TypeDuration), Duration{Months: 1, Days: 2, Nanos: 3})
	add("inet", Simple(TypeInet), "::1")
	add("timeuuid", Simple(TypeTimeUUID), makeTimeUUID(1, 2, [6]byte{3}))
	add("list", ListOf(Simple(TypeBigint)), []any{1, 2, nil})
	add("map", MapOf(Simple(TypeASCII), SetOf(Simple(TypeDouble))), []MapEntry{{"a", []any{1.5}}})
	add("tuple", TypeInfo{ID: TypeTuple, Elems: []TypeInfo{Simple(TypeDate), Simple(TypeTime)}}, []any{uint32(1 << 31), int64(5)})
	add("udt", TypeInfo{ID: TypeUDT, Keyspace: "ks", Name: "u", Fields: []Field{{Name: "a", Type: Simple(TypeBoolean)},
		{Name: "b", Type: Simple(TypeTimestamp)}}}, map[string]any{"a": true, "b": int64(5)})
	return seeds
}

// TestWriteFuzzCorpus writes the seeds as files in testdata/fuzz when run with -update, so
// that plain `go test` runs them too.
func TestWriteFuzzCorpus(t *testing.T) {
	if !*update {
		t.Skip("run with -update to rewrite testdata/fuzz")
	}
	write := func(target, name string, args ...any) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		b.WriteString("go test fuzz v1\n")
		for _, a := range args {
			switch a := a.(type) {
			case []byte:
				fmt.Fprintf(&b, "[]byte(%q)\n", a)
			case byte:
				fmt.Fprintf(&b, "byte(%q)\n", a)
			case bool:
				fmt.Fprintf(&b, "bool(%v)\n", a)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, sanitize(name)), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range frameSeeds() {
		write("FuzzFrame", s.name, s.frame, s.snappy)
	}
	for target, op := range map[string]Opcode{"FuzzQuery": OpQuery, "FuzzExecute": OpExecute, "FuzzBatch": OpBatch, "FuzzResult": OpResult} {
		for _, s := range bodySeeds(op) {
			write(target, s.name, s.body, s.version)
		}
	}
	for _, s := range decompressSeeds() {
		write("FuzzDecompress", s.name, s.frame, s.snappy)
	}
	for _, s := range unmarshalSeeds() {
		write("FuzzUnmarshal", s.name, s.typ, s.value)
	}
}

func sanitize(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	return "seed_" + string(b)
}
