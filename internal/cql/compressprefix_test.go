package cql

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/golang/snappy"
)

// prefixInputs are bodies of every shape the decoders meet: empty, tiny, text, random
// bytes (long literals), runs of one byte (overlapping copies), and mixes of random and
// repeated chunks of random lengths.
func prefixInputs() [][]byte {
	ins := [][]byte{
		{}, {1}, []byte("abcd"), []byte("SELECT * FROM system.local"),
		bytes.Repeat([]byte{'a'}, 1000),
		bytes.Repeat([]byte("ab"), 3000),
		bytes.Repeat([]byte("INSERT INTO ks.t (k, v) VALUES (1, 'x'); "), 400),
		pseudoRandom(300), pseudoRandom(5000), pseudoRandom(70000),
	}
	rnd := pseudoRandom(1 << 16)
	r := 0
	next := func(n int) int { // a deterministic number below n
		r = (r + 3) % (len(rnd) - 2)
		return int(binary.LittleEndian.Uint16(rnd[r:])) % n
	}
	for range 300 {
		var b []byte
		for want := next(4000); len(b) < want; {
			switch next(3) {
			case 0:
				s := next(len(rnd) - 300)
				b = append(b, rnd[s:s+next(300)]...)
			case 1:
				if len(b) > 0 {
					off := 1 + next(len(b))
					b = append(b, b[len(b)-off:len(b)-off+min(off, 1+next(200))]...)
				}
			case 2:
				b = append(b, bytes.Repeat([]byte{byte(next(256))}, next(100))...)
			}
		}
		ins = append(ins, b)
	}
	return ins
}

// prefixLengths are the prefix lengths tried on a body of n bytes.
func prefixLengths(n int) []int {
	return []int{0, 1, 2, 3, 4, 5, 7, 8, 11, 12, 15, 16, 17, 19, 31, 60, 64, 65, 100, 128, 255, 256, 1000, 4096,
		max(n-1, 0), n, n + 1}
}

func TestPrefixMatchesFullDecompression(t *testing.T) {
	decoders := []struct {
		comp   Compressor
		prefix func(dst, src []byte, max int) []byte
	}{
		{LZ4{}, LZ4Prefix},
		{Snappy{}, SnappyPrefix},
	}
	for _, d := range decoders {
		t.Run(d.comp.Name(), func(t *testing.T) {
			checked := 0
			for k, in := range prefixInputs() {
				z, err := d.comp.Compress(nil, in)
				if err != nil {
					t.Fatal(err)
				}
				for _, n := range prefixLengths(len(in)) {
					dst := make([]byte, 0, n)
					got := d.prefix(dst, z, n)
					want := in[:min(n, len(in))]
					if got == nil || !bytes.Equal(got, want) {
						t.Fatalf("input %d (%d bytes), prefix %d: got %d bytes (nil %v); want %d", k, len(in), n, len(got), got == nil, len(want))
					}
					if len(got) > 0 && &got[:1][0] != &dst[:1][0] {
						t.Fatalf("input %d, prefix %d: output not in dst", k, n)
					}
					checked++
				}
				// A cut block yields the true prefix when the prefix lies before the cut,
				// nil otherwise, and never the whole body.
				for _, cut := range []int{len(z) - 1, len(z) / 2, 3, 1, 0} {
					if cut < 0 || cut >= len(z) {
						continue
					}
					for _, n := range []int{16, 128, len(in)} {
						got := d.prefix(nil, z[:cut], n)
						if got != nil && !bytes.Equal(got, in[:min(n, len(in))]) {
							t.Fatalf("input %d cut at %d of %d, prefix %d: wrong bytes", k, cut, len(z), n)
						}
						if n == len(in) && len(in) > 0 && got != nil {
							t.Fatalf("input %d cut at %d of %d: the whole body came out of a cut block", k, cut, len(z))
						}
					}
				}
			}
			t.Logf("%d prefixes compared", checked)
		})
	}
}

// TestSnappyPrefixRareElements covers what the Go encoder never writes: literals with a 3-
// or 4-byte length, and copies with a 4-byte offset. The reference decoder accepts them.
func TestSnappyPrefixRareElements(t *testing.T) {
	block := binary.AppendUvarint(nil, 12)
	block = append(block, 62<<2, 4, 0, 0) // literal of 5 bytes, 3-byte length
	block = append(block, "hello"...)
	block = append(block, 63<<2, 0, 0, 0, 0, '!') // literal of 1 byte, 4-byte length
	block = append(block, 5<<2|3, 6, 0, 0, 0)     // copy of 6 bytes from 6 back, 4-byte offset
	want, err := snappy.Decode(nil, block)
	if err != nil || string(want) != "hello!hello!" {
		t.Fatalf("reference decoder: %q, %v", want, err)
	}
	for n := range len(want) + 2 {
		if got := SnappyPrefix(nil, block, n); string(got) != string(want[:min(n, len(want))]) {
			t.Errorf("prefix %d = %q; want %q", n, got, want[:min(n, len(want))])
		}
	}
}

func TestPrefixRejectsMalformed(t *testing.T) {
	snappyTests := map[string][]byte{
		"empty":               nil,
		"varint cut":          {0x80},
		"varint too long":     {0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"literal past end":    {10, 9 << 2, 'a'},
		"literal length cut":  {10, 61 << 2, 1},
		"copy before start":   {10, 1<<2 | 1, 1},
		"copy offset 0":       {10, 0, 'a', 1<<2 | 2, 0, 0},
		"copy offset too far": {10, 0, 'a', 1<<2 | 2, 2, 0},
		"copy offset cut":     {10, 0, 'a', 1<<2 | 3, 1, 0},
		"short block":         {10, 0, 'a'},
	}
	for name, src := range snappyTests {
		if got := SnappyPrefix(make([]byte, 0, 64), src, 64); got != nil {
			t.Errorf("snappy %s: got %q; want nil", name, got)
		}
	}
	lz4Tests := map[string][]byte{
		"no length":         {0, 0, 0},
		"literal past end":  {0, 0, 0, 10, 0x50, 'a'},
		"literal ext cut":   {0, 0, 0, 30, 0xf0},
		"offset cut":        {0, 0, 0, 10, 0x10, 'a', 1},
		"offset 0":          {0, 0, 0, 10, 0x10, 'a', 0, 0},
		"offset too far":    {0, 0, 0, 10, 0x10, 'a', 2, 0},
		"match ext cut":     {0, 0, 0, 30, 0x1f, 'a', 1, 0},
		"short block":       {0, 0, 0, 10, 0x10, 'a'},
		"huge literal ext":  append([]byte{0, 0, 0, 100, 0xf0}, bytes.Repeat([]byte{255}, 1<<17)...),
		"no literal no end": {0, 0, 0, 10},
	}
	for name, src := range lz4Tests {
		if got := LZ4Prefix(make([]byte, 0, 64), src, 64); got != nil {
			t.Errorf("lz4 %s: got %q; want nil", name, got)
		}
	}
	// An empty body is not malformed, even without a dst.
	if got := SnappyPrefix(nil, []byte{0}, 64); got == nil || len(got) != 0 {
		t.Errorf("empty snappy body: %v", got)
	}
	if got := LZ4Prefix(nil, []byte{0, 0, 0, 0, 0}, 64); got == nil || len(got) != 0 {
		t.Errorf("empty lz4 body: %v", got)
	}
}

// fuzzPrefix checks a prefix decoder on arbitrary input: it never panics, it returns at
// most max bytes in dst's array, and when the full decompression accepts src, the prefix
// is there and is the start of the full body.
func fuzzPrefix(t *testing.T, c Compressor, prefix func(dst, src []byte, max int) []byte, src []byte, m uint16) {
	n := int(m)
	dst := make([]byte, 0, n)
	got := prefix(dst, src, n)
	if len(got) > n {
		t.Fatalf("%d bytes for a prefix of %d", len(got), n)
	}
	if len(got) > 0 && &got[:1][0] != &dst[:1][0] {
		t.Fatal("output not in dst")
	}
	full, err := c.Decompress(nil, src)
	if err != nil {
		return
	}
	if want := full[:min(n, len(full))]; got == nil || !bytes.Equal(got, want) {
		t.Fatalf("prefix %d: got %q (nil %v); want %q", n, got, got == nil, want)
	}
}

func prefixSeeds(f *testing.F, c Compressor) {
	for _, in := range [][]byte{{}, []byte("SELECT * FROM system.local"), bytes.Repeat([]byte("ab"), 100), pseudoRandom(200)} {
		z, _ := c.Compress(nil, append(AppendLongString(nil, string(in)), 0, 1))
		f.Add(z, uint16(64))
		f.Add(z, uint16(1000))
	}
}

func FuzzSnappyPrefix(f *testing.F) {
	prefixSeeds(f, Snappy{})
	f.Fuzz(func(t *testing.T, src []byte, m uint16) { fuzzPrefix(t, Snappy{}, SnappyPrefix, src, m) })
}

func FuzzLZ4Prefix(f *testing.F) {
	prefixSeeds(f, LZ4{})
	f.Fuzz(func(t *testing.T, src []byte, m uint16) { fuzzPrefix(t, LZ4{}, LZ4Prefix, src, m) })
}
