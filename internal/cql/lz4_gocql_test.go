package cql

import "testing"

// gocqlCompressor is gocql.Compressor's method set, which LZ4 implements for the load
// checker and the driver tests.
type gocqlCompressor interface {
	Name() string
	Encode(data []byte) ([]byte, error)
	Decode(data []byte) ([]byte, error)
}

var _ gocqlCompressor = LZ4{}

func TestLZ4EncodeDecode(t *testing.T) {
	for _, in := range [][]byte{{}, []byte("hello"), make([]byte, 10000), []byte("abcabcabcabcabcabcabcabcabcabc")} {
		enc, err := LZ4{}.Encode(in)
		if err != nil {
			t.Fatal(err)
		}
		dec, err := LZ4{}.Decode(enc)
		if err != nil || string(dec) != string(in) {
			t.Errorf("lz4 round trip of %d bytes: got %d bytes, %v", len(in), len(dec), err)
		}
	}
	if _, err := (LZ4{}).Decode([]byte{0xff, 0xff, 0xff, 0xff, 0}); err == nil {
		t.Error("Decode accepted an implausible length")
	}
}
