package cql

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"testing"
)

// The golden bytes below were written by the DataStax Python driver's SegmentCodec
// (cassandra/segment.py, python3-cassandra 3.25), the reference a v5 client uses.
const (
	// An OPTIONS frame of stream 1, in one self-contained segment.
	pyOptionsPlain = "090002a4c8c1050000010500000000b5557486"
	pyOptionsLZ4   = "0900000004c2b895050000010500000000b5557486"
	// A 132-byte QUERY frame: compressible, so the lz4 segment holds it compressed.
	pyQueryPlain = "8400024d287605000002070000007b0000007453454c454354202a2046524f4d206b732e74205748455245206b203d20312053454c454354202a2046524f4d206b732e74205748455245206b203d20312053454c454354202a2046524f4d206b732e74205748455245206b203d2031202d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d000100b340d2da"
	pyQueryLZ4   = "3c000801040c26f6ff1d05000002070000007b0000007453454c454354202a2046524f4d206b732e74205748455245206b203d2031201f002b1f2d010001502d2d0001002002605a"
)

func pyQueryFrame() []byte {
	f := []byte{0x05, 0, 0, 2, 0x07, 0, 0, 0, 123, 0, 0, 0, 0x74}
	f = append(f, bytes.Repeat([]byte("SELECT * FROM ks.t WHERE k = 1 "), 3)...)
	f = append(f, bytes.Repeat([]byte("-"), 23)...)
	return append(f, 0, 1, 0)
}

// TestSegmentSpec checks the framing of native_protocol_v5.spec, sections 2.1 and 2.2,
// example by example: the CRCs' parameters and check values, where each field of the two
// headers sits, and segments as the Python driver writes them.
func TestSegmentSpec(t *testing.T) {
	t.Run("CRC", func(t *testing.T) {
		tests := []struct {
			name string
			got  uint32
			want uint32
		}{
			// CRC24: initial value 0x875060, polynomial 0x1974F0B, over the header bytes.
			{"CRC24 of no bytes is its initial value", CRC24(0, 0), 0x875060},
			{"CRC24 of a zero 3-byte header", CRC24(0, 3), 0x7de777},
			{"CRC24 of length 50, self-contained", CRC24(50|1<<17, 3), 0xeeffa5},
			{"CRC24 of the largest length", CRC24(MaxSegmentPayload, 3), 0xfe9138},
			{"CRC24 of the largest length, self-contained", CRC24(MaxSegmentPayload|1<<17, 3), 0x474025},
			{"CRC24 of an lz4 header", CRC24(5|9<<17|1<<34, 5), 0x855678},
			{"CRC24 of 123456789's first 8 bytes", CRC24(binary.LittleEndian.Uint64([]byte("12345678")), 8), 0x026b04},
			// CRC32: IEEE, continued from the bytes 0xFA 0x2D 0x55 0xCA.
			{"CRC32 of no payload", CRC32(nil), 0x44777ed3},
			{"CRC32 check value", CRC32([]byte("123456789")), 0xe2a261a7},
		}
		for _, tt := range tests {
			if tt.got != tt.want {
				t.Errorf("%s: got %#06x; want %#06x", tt.name, tt.got, tt.want)
			}
		}
	})
	t.Run("headers", func(t *testing.T) {
		tests := []struct {
			name string
			h    SegmentHeader
			lz4  bool
			want string // the header's bytes, CRC24 included
		}{
			// "The first 3 bytes of the header represent a single unsigned little-endian
			// integer. The self contained flag is the 17th bit of that decoded integer."
			{"length 50, self-contained", SegmentHeader{Length: 50, SelfContained: true}, false, "320002a5ffee"},
			{"length 0, not self-contained", SegmentHeader{}, false, "00000077e77d"},
			{"largest payload: 17 bits", SegmentHeader{Length: MaxSegmentPayload, SelfContained: true}, false, "ffff03254047"},
			// "compressed length (17 bits), uncompressed length (17 bits), isSelfContained
			// flag (1 bit)", then the CRC24 of those 5 bytes.
			{"lz4: 5 compressed, 9 uncompressed, self-contained", SegmentHeader{Length: 5, Uncompressed: 9, SelfContained: true}, true, "0500120004785685"},
			// "An uncompressed length of 0 signals that the compressed payload should be
			// used as-is and not decompressed."
			{"lz4: stored as is", SegmentHeader{Length: 9, SelfContained: true}, true, "0900000004c2b895"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got := AppendSegmentHeader(nil, tt.h, tt.lz4)
				if hex.EncodeToString(got) != tt.want {
					t.Errorf("AppendSegmentHeader: got %x; want %s", got, tt.want)
				}
				back, err := ParseSegmentHeader(got, tt.lz4)
				if err != nil || back != tt.h {
					t.Errorf("ParseSegmentHeader: got %+v, %v; want %+v", back, err, tt.h)
				}
				if n := segmentHeaderSize(tt.lz4); len(got) != n {
					t.Errorf("header of %d bytes; want %d", len(got), n)
				}
			})
		}
	})
	t.Run("Python driver", func(t *testing.T) {
		options := []byte{0x05, 0, 0, 1, 0x05, 0, 0, 0, 0}
		tests := []struct {
			name   string
			frame  []byte
			lz4    bool
			golden string
			// same says that AppendSegment writes the very bytes: it stores a payload as
			// is when lz4 would not make it smaller, as the driver does, but its lz4
			// encoder need not pick the driver's matches.
			same bool
		}{
			{"OPTIONS", options, false, pyOptionsPlain, true},
			{"OPTIONS, lz4 format, stored as is", options, true, pyOptionsLZ4, true},
			{"QUERY", pyQueryFrame(), false, pyQueryPlain, true},
			{"QUERY, lz4", pyQueryFrame(), true, pyQueryLZ4, false},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				golden := mustHex(t, tt.golden)
				r := SegmentReader{LZ4: tt.lz4}
				n, _, frames, err := r.Next(golden)
				if err != nil || n != len(golden) || !bytes.Equal(frames, tt.frame) {
					t.Fatalf("Next(the driver's segment): %d bytes, %x, %v; want %d bytes, %x", n, frames, err, len(golden), tt.frame)
				}
				ours := AppendSegments(nil, tt.frame, tt.lz4)
				if tt.same && !bytes.Equal(ours, golden) {
					t.Errorf("AppendSegments: got %x; want the driver's %x", ours, golden)
				}
				r = SegmentReader{LZ4: tt.lz4}
				if _, _, frames, err := r.Next(ours); err != nil || !bytes.Equal(frames, tt.frame) {
					t.Errorf("Next(ours): %x, %v; want %x", frames, err, tt.frame)
				}
			})
		}
	})
}

// testFrame returns a frame of the given body size, with a body of compressible bytes.
func testFrame(stream int16, n int) []byte {
	f := AppendHeader(nil, Header{Version: V5, Stream: stream, Opcode: OpQuery, Length: uint32(n)})
	for i := range n {
		f = append(f, byte('a'+i%7))
	}
	return f
}

// readAll feeds b to a SegmentReader in chunks of at most step bytes, as a transport
// would, and returns the frames, in order.
func readAll(tb testing.TB, r *SegmentReader, b []byte, step int) []byte {
	tb.Helper()
	var out, pend []byte
	for len(b) > 0 || len(pend) > 0 {
		k := min(step, len(b))
		pend = append(pend, b[:k]...)
		b = b[k:]
		for {
			n, need, frames, err := r.Next(pend)
			if err != nil {
				tb.Fatalf("Next: %v", err)
			}
			if n == 0 {
				if need > 0 && need < len(pend) {
					tb.Fatalf("Next: not whole with %d bytes; need %d", len(pend), need)
				}
				break
			}
			out = append(out, frames...)
			pend = pend[n:]
		}
		if k == 0 && len(pend) > 0 {
			tb.Fatalf("%d bytes left over", len(pend))
		}
	}
	return out
}

func TestSegmentsRoundTrip(t *testing.T) {
	sizes := []int{0, 1, 100, MaxSegmentPayload - HeaderSize, MaxSegmentPayload - HeaderSize + 1, 3*MaxSegmentPayload + 5, 1 << 20}
	for _, lz4 := range []bool{false, true} {
		for _, size := range sizes {
			var frames []byte
			for i := range 3 {
				frames = append(frames, testFrame(int16(i), size)...)
			}
			segs := AppendSegments(nil, frames, lz4)
			for _, step := range []int{1, 7, 4096, len(segs)} {
				if size > 1000 && step < 4096 {
					continue // split at every byte below: TestSegmentsSplitEverywhere
				}
				r := SegmentReader{LZ4: lz4}
				if got := readAll(t, &r, segs, step); !bytes.Equal(got, frames) {
					t.Errorf("lz4 %v, frames of %d bytes, reads of %d: got %d bytes of frames back; want %d", lz4, size, step, len(got), len(frames))
				}
				if r.Gathering() {
					t.Errorf("lz4 %v, frames of %d bytes: still gathering a frame", lz4, size)
				}
			}
		}
	}
}

// TestSegmentsSplitEverywhere cuts a run of segments (small frames packed together, and a
// frame larger than a segment) at every byte: the frames come out the same.
func TestSegmentsSplitEverywhere(t *testing.T) {
	for _, lz4 := range []bool{false, true} {
		frames := append(testFrame(1, 10), testFrame(2, 200)...)
		frames = append(frames, testFrame(3, MaxSegmentPayload+1000)...)
		frames = append(frames, testFrame(4, 0)...)
		segs := AppendSegments(nil, frames, lz4)
		for cut := range len(segs) + 1 {
			if !nearBoundary(segs, cut, lz4) && cut%509 != 0 {
				continue // inside a large payload, every byte is alike: a sample is enough
			}
			r := SegmentReader{LZ4: lz4}
			var got []byte
			pend := append([]byte(nil), segs[:cut]...)
			rest := segs[cut:]
			for round := 0; ; round++ {
				n, _, f, err := r.Next(pend)
				if err != nil {
					t.Fatalf("lz4 %v, cut at %d: %v", lz4, cut, err)
				}
				if n == 0 {
					if len(rest) == 0 {
						break
					}
					pend, rest = append(pend, rest...), nil
					continue
				}
				got = append(got, f...)
				pend = pend[n:]
			}
			if !bytes.Equal(got, frames) || len(pend) != 0 {
				t.Fatalf("lz4 %v, cut at %d: got %d bytes of frames, %d left; want %d, 0", lz4, cut, len(got), len(pend), len(frames))
			}
		}
	}
}

// nearBoundary reports whether cut falls within 32 bytes of the start or end of a
// segment of segs, or within a small segment.
func nearBoundary(segs []byte, cut int, lz4 bool) bool {
	for at := 0; at < len(segs); {
		h, err := ParseSegmentHeader(segs[at:], lz4)
		if err != nil {
			return true
		}
		end := at + h.Size(lz4)
		if cut >= at-32 && cut <= at+32 || cut >= end-32 && cut <= end+32 || h.Length < 1024 && cut >= at && cut <= end {
			return true
		}
		at = end
	}
	return false
}

func TestSegmentErrors(t *testing.T) {
	small := AppendSegments(nil, testFrame(1, 20), false)
	smallLZ4 := AppendSegments(nil, testFrame(1, 200), true)
	large := AppendSegments(nil, testFrame(2, MaxSegmentPayload+10), false)
	flip := func(b []byte, i int) []byte {
		b = append([]byte(nil), b...)
		b[i] ^= 0x10
		return b
	}
	// segment wraps payload in a segment with a valid header and CRC.
	segment := func(payload []byte, self bool) []byte { return AppendSegment(nil, payload, self, false) }
	first := large[:SegmentHeaderSize+MaxSegmentPayload+SegmentTrailerSize]
	tests := []struct {
		name  string
		lz4   bool
		input [][]byte // segments fed in order; the last one fails
		want  error
	}{
		{"header CRC", false, [][]byte{flip(small, 0)}, ErrSegmentCRC},
		{"header CRC byte", false, [][]byte{flip(small, 4)}, ErrSegmentCRC},
		{"payload CRC", false, [][]byte{flip(small, SegmentHeaderSize+3)}, ErrSegmentCRC},
		{"trailer", false, [][]byte{flip(small, len(small)-1)}, ErrSegmentCRC},
		{"lz4 payload CRC", true, [][]byte{flip(smallLZ4, SegmentHeaderSizeLZ4+2)}, ErrSegmentCRC},
		{"a frame longer than its self-contained segment", false, [][]byte{segment(testFrame(1, 20)[:25], true)}, ErrSegmentFraming},
		{"a frame header cut short", false, [][]byte{segment(append(testFrame(1, 2), 5, 0, 0), true)}, ErrSegmentFraming},
		{"a large frame that fits one segment", false, [][]byte{segment(testFrame(1, 20), false)}, ErrSegmentFraming},
		{"a large frame's first segment without its header", false, [][]byte{segment([]byte{5, 0, 0}, false)}, ErrSegmentFraming},
		{"a large frame cut by a self-contained segment", false, [][]byte{first, small}, ErrSegmentFraming},
		{"a large frame overrun", false, [][]byte{first, segment(make([]byte, 100), false)}, ErrSegmentFraming},
		{"an lz4 payload that does not decompress", true, [][]byte{func() []byte {
			payload := []byte{0xff, 0xff, 0xff}
			b := AppendSegmentHeader(nil, SegmentHeader{Length: len(payload), Uncompressed: 100, SelfContained: true}, true)
			b = append(b, payload...)
			return binary.LittleEndian.AppendUint32(b, CRC32(payload))
		}()}, ErrSegmentFraming},
		{"an lz4 payload that decompresses short of its length", true, [][]byte{func() []byte {
			seg := AppendSegment(nil, bytes.Repeat(testFrame(1, 100), 4), true, true)
			h, _ := ParseSegmentHeader(seg, true)
			h.Uncompressed++
			out := AppendSegmentHeader(nil, h, true)
			return append(out, seg[SegmentHeaderSizeLZ4:]...)
		}()}, ErrSegmentFraming},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := SegmentReader{LZ4: tt.lz4}
			for i, seg := range tt.input {
				_, _, _, err := r.Next(seg)
				if i < len(tt.input)-1 {
					if err != nil {
						t.Fatalf("segment %d: %v", i, err)
					}
					continue
				}
				if !errors.Is(err, tt.want) {
					t.Errorf("got %v; want %v", err, tt.want)
				}
			}
		})
	}
}

// TestSegmentLyingLength: a header that claims a payload never sent costs nothing until
// the bytes arrive; a large frame that claims more than the limit is refused by its
// header, before it is gathered.
func TestSegmentLyingLength(t *testing.T) {
	r := SegmentReader{}
	hdr := AppendSegmentHeader(nil, SegmentHeader{Length: MaxSegmentPayload, SelfContained: true}, false)
	n, need, frames, err := r.Next(append(hdr, 1, 2, 3))
	if n != 0 || need != SegmentHeaderSize+MaxSegmentPayload+SegmentTrailerSize || frames != nil || err != nil {
		t.Errorf("Next(a header claiming the largest payload, and 3 bytes): %d, %d, %v, %v; want 0, %d, nil, nil", n, need, frames, err, SegmentHeaderSize+MaxSegmentPayload+SegmentTrailerSize)
	}
	refused := errors.New("refused")
	var seen Header
	r.CheckLarge = func(hb []byte) error {
		seen, _ = ParseHeader(hb)
		return refused
	}
	huge := AppendHeader(nil, Header{Version: V5, Stream: 7, Opcode: OpQuery, Length: 0x7fffffff})
	huge = append(huge, make([]byte, 1000)...)
	if _, _, _, err := r.Next(AppendSegment(nil, huge, false, false)); err != refused {
		t.Errorf("Next(the first segment of a frame claiming 2 GiB): %v; want CheckLarge's error", err)
	}
	if seen.Stream != 7 || seen.Length != 0x7fffffff {
		t.Errorf("CheckLarge saw %+v; want the frame's header", seen)
	}
	if cap(r.large) != 0 {
		t.Errorf("a refused frame kept %d bytes", cap(r.large))
	}
	r.CheckLarge = nil
	if _, _, _, err := r.Next(AppendSegment(nil, huge, false, false)); err != ErrFrameTooBig {
		t.Errorf("without CheckLarge: %v; want ErrFrameTooBig (over MaxBodySize)", err)
	}
}

func BenchmarkSegmentReader(b *testing.B) {
	for _, lz4 := range []bool{false, true} {
		name := "plain"
		if lz4 {
			name = "lz4"
		}
		seg := AppendSegments(nil, testFrame(1, 100), lz4)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			r := SegmentReader{LZ4: lz4}
			for b.Loop() {
				if _, _, _, err := r.Next(seg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkAppendSegments(b *testing.B) {
	frame := testFrame(1, 100)
	for _, lz4 := range []bool{false, true} {
		name := "plain"
		if lz4 {
			name = "lz4"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			var out []byte
			for b.Loop() {
				out = AppendSegments(out[:0], frame, lz4)
			}
		})
	}
}

// FuzzSegmentReader feeds a SegmentReader bytes it must not trust, in chunks cut where
// the fuzzer says: it never panics, never returns frames that do not line up with their
// headers, and holds no more than it was given.
func FuzzSegmentReader(f *testing.F) {
	for _, s := range []string{pyOptionsPlain, pyQueryPlain} {
		f.Add(mustHex(f, s), false, uint16(3))
	}
	for _, s := range []string{pyOptionsLZ4, pyQueryLZ4} {
		f.Add(mustHex(f, s), true, uint16(5))
	}
	f.Add(AppendSegments(nil, testFrame(1, MaxSegmentPayload+50), false), false, uint16(1000))
	f.Add(AppendSegments(nil, testFrame(1, MaxSegmentPayload+50), true), true, uint16(1000))
	f.Fuzz(func(t *testing.T, b []byte, lz4 bool, step uint16) {
		r := SegmentReader{LZ4: lz4}
		var pend []byte
		fed := 0
		for len(b) > 0 {
			k := min(max(int(step), 1), len(b))
			pend = append(pend, b[:k]...)
			b, fed = b[k:], fed+k
			for {
				n, _, frames, err := r.Next(pend)
				if err != nil {
					return
				}
				if n == 0 {
					break
				}
				for rest := frames; len(rest) > 0; {
					if len(rest) < HeaderSize {
						t.Fatalf("a frame of %d bytes", len(rest))
					}
					size := HeaderSize + int(binary.BigEndian.Uint32(rest[5:9]))
					if size > len(rest) {
						t.Fatalf("a frame of %d bytes claims %d", len(rest), size)
					}
					rest = rest[size:]
				}
				pend = pend[n:]
			}
			// What is held grows with what was fed: a gathered frame (its buffer twice its
			// bytes at most) and one decompressed segment; lz4 expands 255 times at most.
			limit := 2*fed + 64
			if lz4 {
				limit = 3*255*fed + 64
			}
			if held := cap(r.large) + cap(r.buf); held > limit {
				t.Fatalf("holds %d bytes after %d fed", held, fed)
			}
		}
	})
}

// FuzzSegmentsCorrupted makes valid segments from the fuzzer's frames, then flips one
// bit: the reader either reports an error or, when the bit fell where no check covers it
// (none should), returns the frames unchanged. And the same segments cut at a random byte
// read back the same.
func FuzzSegmentsCorrupted(f *testing.F) {
	f.Add([]byte("hello"), uint16(0), uint32(17), false)
	f.Add(bytes.Repeat([]byte("x"), 3000), uint16(200), uint32(9999), true)
	f.Fuzz(func(t *testing.T, body []byte, sizes uint16, bit uint32, lz4 bool) {
		var frames []byte
		rng := rand.New(rand.NewPCG(uint64(sizes), uint64(bit)))
		for i := range 1 + int(sizes%4) {
			n := min(len(body), rng.IntN(len(body)+1))
			if i == 0 && sizes%7 == 0 {
				n = MaxSegmentPayload + 10 // a large frame too
			}
			fr := AppendHeader(nil, Header{Version: V5, Stream: int16(i), Opcode: OpQuery, Length: uint32(n)})
			for j := range n {
				c := byte(j)
				if len(body) > 0 {
					c ^= body[j%len(body)]
				}
				fr = append(fr, c)
			}
			frames = append(frames, fr...)
		}
		segs := AppendSegments(nil, frames, lz4)
		cut := int(bit % uint32(len(segs)+1))
		r := SegmentReader{LZ4: lz4}
		if got := readTwo(t, &r, segs[:cut], segs[cut:]); !bytes.Equal(got, frames) {
			t.Fatalf("cut at %d: got %d bytes of frames; want %d", cut, len(got), len(frames))
		}
		bad := append([]byte(nil), segs...)
		at := int(bit/8) % len(bad)
		bad[at] ^= 1 << (bit % 8)
		r = SegmentReader{LZ4: lz4}
		var got []byte
		for rest := bad; len(rest) > 0; {
			n, _, fr, err := r.Next(rest)
			if err != nil {
				return // caught
			}
			if n == 0 {
				// A flipped length bit that claims more than was sent: the reader waits for
				// bytes that never come, holding nothing more.
				return
			}
			got = append(got, fr...)
			rest = rest[n:]
		}
		t.Fatalf("flipped bit %d of byte %d of %d went unnoticed (frames equal: %v)", bit%8, at, len(bad), bytes.Equal(got, frames))
	})
}

func readTwo(tb testing.TB, r *SegmentReader, a, b []byte) []byte {
	tb.Helper()
	var got []byte
	pend := append([]byte(nil), a...)
	for {
		n, _, fr, err := r.Next(pend)
		if err != nil {
			tb.Fatal(err)
		}
		if n == 0 {
			if b == nil {
				break
			}
			pend, b = append(pend, b...), nil
			continue
		}
		got = append(got, fr...)
		pend = pend[n:]
	}
	return got
}
