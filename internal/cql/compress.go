package cql

import (
	"encoding/binary"
	"fmt"
	"strings"
	"sync"

	"github.com/golang/snappy"
	"github.com/pierrec/lz4/v4"
)

// Compressor compresses and decompresses frame bodies. Both methods append their output to
// dst and return the extended slice. Implementations must be safe for concurrent use.
type Compressor interface {
	// Name returns the name used in the COMPRESSION option of STARTUP, such as "lz4".
	Name() string
	// Compress appends the compressed form of src to dst.
	Compress(dst, src []byte) ([]byte, error)
	// Decompress appends the decompressed form of src to dst. It refuses, with ErrMalformed,
	// an announced size above MaxBodySize or above 255*len(src)+16.
	Decompress(dst, src []byte) ([]byte, error)
}

// CompressorByName returns the Compressor for a COMPRESSION option value, "lz4" or "snappy"
// in any case, or nil for any other name.
func CompressorByName(name string) Compressor {
	switch strings.ToLower(name) {
	case "lz4":
		return LZ4{}
	case "snappy":
		return Snappy{}
	}
	return nil
}

// plausibleSize reports whether n bytes can come out of src compressed bytes: neither lz4
// nor snappy expands more than 255 times.
func plausibleSize(n uint64, src int) bool {
	return n <= MaxBodySize && n <= 255*uint64(src)+16
}

// grow returns b with n more bytes of length; the new bytes are not zeroed.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), len(b)+n)
		copy(nb, b)
		b = nb
	}
	return b[:len(b)+n]
}

// LZ4 is Cassandra's lz4 body compression: a 4-byte big-endian uncompressed length, then a
// raw lz4 block. The zero value is ready to use and safe for concurrent use.
type LZ4 struct{}

// Name returns "lz4".
func (LZ4) Name() string { return "lz4" }

var lz4Pool = sync.Pool{New: func() any { return new(lz4.Compressor) }}

// Compress appends the length-prefixed lz4 block of src to dst.
func (LZ4) Compress(dst, src []byte) ([]byte, error) {
	start := len(dst)
	bound := lz4.CompressBlockBound(len(src))
	dst = grow(dst, 4+bound)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(src)))
	if len(src) == 0 {
		// lz4 encodes an empty block as a single token with no literals.
		dst[start+4] = 0
		return dst[:start+5], nil
	}
	c := lz4Pool.Get().(*lz4.Compressor)
	n, err := c.CompressBlock(src, dst[start+4:])
	lz4Pool.Put(c)
	if err != nil {
		return dst[:start], fmt.Errorf("lz4: %w", err)
	}
	return dst[:start+4+n], nil
}

// Decompress appends the decompressed body of a length-prefixed lz4 block to dst.
func (LZ4) Decompress(dst, src []byte) ([]byte, error) {
	countWork(WorkDecompress, src)
	if len(src) < 4 {
		return dst, ErrMalformed
	}
	n := binary.BigEndian.Uint32(src)
	if !plausibleSize(uint64(n), len(src)-4) {
		return dst, ErrMalformed
	}
	if n == 0 {
		return dst, nil
	}
	start := len(dst)
	out := grow(dst, int(n))
	got, err := lz4.UncompressBlock(src[4:], out[start:])
	if err != nil || got != int(n) {
		return dst, ErrMalformed
	}
	return out, nil
}

// Encode returns the compressed body of b: with Name and Decode, LZ4 is a gocql.Compressor,
// the one lz4 adapter that the load checker and the driver tests give gocql, which ships
// only snappy.
func (l LZ4) Encode(b []byte) ([]byte, error) { return l.Compress(nil, b) }

// Decode returns the decompressed body of b.
func (l LZ4) Decode(b []byte) ([]byte, error) { return l.Decompress(nil, b) }

// Snappy is snappy body compression: one plain snappy block. The zero value is ready to use
// and safe for concurrent use.
type Snappy struct{}

// Name returns "snappy".
func (Snappy) Name() string { return "snappy" }

// Compress appends the snappy block of src to dst.
func (Snappy) Compress(dst, src []byte) ([]byte, error) {
	start := len(dst)
	out := grow(dst, snappy.MaxEncodedLen(len(src)))
	enc := snappy.Encode(out[start:], src)
	return out[:start+len(enc)], nil
}

// Decompress appends the decompressed snappy block to dst.
func (Snappy) Decompress(dst, src []byte) ([]byte, error) {
	countWork(WorkDecompress, src)
	n, err := snappy.DecodedLen(src)
	if err != nil || n < 0 || !plausibleSize(uint64(n), len(src)) {
		return dst, ErrMalformed
	}
	start := len(dst)
	out := grow(dst, n)
	dec, err := snappy.Decode(out[start:], src)
	if err != nil || len(dec) != n {
		return dst, ErrMalformed
	}
	return out, nil
}
