package cql

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/golang/snappy"
	"github.com/pierrec/lz4/v4"
)

func TestCompressorByName(t *testing.T) {
	tests := []struct {
		name, want string
	}{
		{"lz4", "lz4"}, {"LZ4", "lz4"}, {"snappy", "snappy"}, {"Snappy", "snappy"},
	}
	for _, tc := range tests {
		if c := CompressorByName(tc.name); c == nil || c.Name() != tc.want {
			t.Errorf("CompressorByName(%q) = %v", tc.name, c)
		}
	}
	for _, name := range []string{"", "zstd", "deflate"} {
		if c := CompressorByName(name); c != nil {
			t.Errorf("CompressorByName(%q) = %v; want nil", name, c)
		}
	}
}

func TestCompressRoundTrip(t *testing.T) {
	inputs := map[string][]byte{
		"empty":        {},
		"one":          {42},
		"text":         bytes.Repeat([]byte("SELECT * FROM system.local WHERE key='local' "), 50),
		"incompressed": pseudoRandom(5000),
	}
	for _, c := range []Compressor{LZ4{}, Snappy{}} {
		for name, in := range inputs {
			t.Run(c.Name()+"/"+name, func(t *testing.T) {
				z, err := c.Compress([]byte("pre"), in)
				if err != nil {
					t.Fatal(err)
				}
				if string(z[:3]) != "pre" {
					t.Fatalf("Compress overwrote dst")
				}
				out, err := c.Decompress([]byte("x"), z[3:])
				if err != nil {
					t.Fatal(err)
				}
				if out[0] != 'x' || !bytes.Equal(out[1:], in) {
					t.Fatalf("round trip gave %d bytes; want %d", len(out)-1, len(in))
				}
			})
		}
	}
}

// TestCompressFormats checks the wire formats against the libraries directly: Cassandra's
// lz4 is a big-endian length and a raw block, and snappy is a plain block.
func TestCompressFormats(t *testing.T) {
	in := bytes.Repeat([]byte("abcdefgh"), 100)
	z, err := LZ4{}.Compress(nil, in)
	if err != nil {
		t.Fatal(err)
	}
	if n := binary.BigEndian.Uint32(z); n != uint32(len(in)) {
		t.Fatalf("lz4 length prefix %d; want %d", n, len(in))
	}
	out := make([]byte, len(in))
	if n, err := lz4.UncompressBlock(z[4:], out); err != nil || !bytes.Equal(out[:n], in) {
		t.Fatalf("lz4.UncompressBlock: %v", err)
	}
	z, _ = Snappy{}.Compress(nil, in)
	if out, err := snappy.Decode(nil, z); err != nil || !bytes.Equal(out, in) {
		t.Fatalf("snappy.Decode: %v", err)
	}
	// Bodies made by other encoders decode too.
	ext := snappy.Encode(nil, in)
	if out, err := (Snappy{}).Decompress(nil, ext); err != nil || !bytes.Equal(out, in) {
		t.Fatalf("Snappy.Decompress of snappy.Encode: %v", err)
	}
}

func TestDecompressRefuses(t *testing.T) {
	lz4Claim := func(n uint32, block []byte) []byte { return append(binary.BigEndian.AppendUint32(nil, n), block...) }
	good, _ := LZ4{}.Compress(nil, []byte("hello hello hello hello"))
	tests := []struct {
		name string
		c    Compressor
		in   []byte
	}{
		{"lz4 short", LZ4{}, []byte{0, 0}},
		{"lz4 over max body", LZ4{}, lz4Claim(MaxBodySize+1, bytes.Repeat([]byte{0}, 2<<20))},
		{"lz4 implausible ratio", LZ4{}, lz4Claim(255*4+17, []byte{0, 0, 0, 0})},
		{"lz4 wrong length", LZ4{}, lz4Claim(binary.BigEndian.Uint32(good)+1, good[4:])},
		{"lz4 shorter length", LZ4{}, lz4Claim(binary.BigEndian.Uint32(good)-1, good[4:])},
		{"lz4 garbage", LZ4{}, lz4Claim(100, []byte{0xff, 0xff, 0xff, 0xff})},
		{"snappy empty", Snappy{}, nil},
		{"snappy implausible", Snappy{}, []byte{0xff, 0xff, 0xff, 0x7f}},
		{"snappy garbage", Snappy{}, []byte{5, 0xff, 0xff}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := tc.c.Decompress([]byte("keep"), tc.in)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v; want ErrMalformed", err)
			}
			if string(out) != "keep" {
				t.Fatalf("dst changed to %q", out)
			}
		})
	}
}

// pseudoRandom returns n bytes that do not compress, without depending on a seed source.
func pseudoRandom(n int) []byte {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}
