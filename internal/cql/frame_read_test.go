package cql

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"testing"
)

// FuzzReadFrame feeds ReadFrameMax frames whose length field lies: it claims more or fewer
// bytes than follow. ReadFrameMax must return either the frame that is really there or an
// error, and never hold a buffer much larger than its input.
func FuzzReadFrame(f *testing.F) {
	for _, s := range frameSeeds() {
		f.Add(s.frame, uint32(0), uint16(0))
	}
	f.Add(AppendHeader(nil, Header{Version: V4, Opcode: OpQuery}), uint32(200<<20), uint16(100))
	f.Add(AppendHeader(nil, Header{Version: V4, Opcode: OpStartup}), uint32(0xffffffff), uint16(9))
	f.Fuzz(func(t *testing.T, frame []byte, claim uint32, maxKiB uint16) {
		if len(frame) >= HeaderSize && claim != 0 {
			frame = bytes.Clone(frame)
			SetBodyLength(frame, int(claim))
		}
		max := int(maxKiB)<<10 + HeaderSize
		if maxKiB == 0 {
			max = MaxBodySize + HeaderSize
		}
		h, body, buf, err := ReadFrameMax(bytes.NewReader(frame), nil, max)
		if limit := 4*len(frame) + growStep; cap(buf) > limit {
			t.Fatalf("buffer of %d bytes for %d bytes of input", cap(buf), len(frame))
		}
		if err != nil {
			if errors.Is(err, ErrFrameTooBig) && uint64(h.Length)+HeaderSize <= uint64(max) {
				t.Fatalf("ErrFrameTooBig for a body of %d bytes under a max of %d", h.Length, max)
			}
			return
		}
		if uint64(h.Length)+HeaderSize > uint64(max) {
			t.Fatalf("accepted a body of %d bytes over a max of %d", h.Length, max)
		}
		if !bytes.Equal(body, frame[HeaderSize:HeaderSize+int(h.Length)]) {
			t.Fatalf("body %x, want %x", body, frame[HeaderSize:HeaderSize+int(h.Length)])
		}
	})
}

// trickle returns its bytes a chunk at a time, as a socket does.
type trickle struct {
	left  int
	chunk int
}

func (r *trickle) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	n := min(len(p), r.chunk, r.left)
	clear(p[:n])
	r.left -= n
	return n, nil
}

// TestReadFrameLyingLengthAllocation claims a 200 MiB body and sends 8 MiB of it: the memory
// allocated follows the 8 MiB received, not the 200 MiB claimed.
func TestReadFrameLyingLengthAllocation(t *testing.T) {
	const claim, sent = 200 << 20, 8 << 20
	hdr := AppendHeader(nil, Header{Version: V4, Opcode: OpQuery, Length: claim})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := io.MultiReader(bytes.NewReader(hdr), &trickle{left: sent, chunk: 64 << 10})
	_, _, buf, err := ReadFrame(r, nil)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v, want io.ErrUnexpectedEOF", err)
	}
	if len(buf) != HeaderSize+sent {
		t.Fatalf("read %d bytes, want %d", len(buf), HeaderSize+sent)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("claimed %d MiB, sent %d MiB: allocated %.1f MiB", claim>>20, sent>>20, float64(alloc)/(1<<20))
	if alloc > 4*sent+growStep+(1<<20) {
		t.Fatalf("allocated %d bytes for %d bytes received (claim %d): want at most 4x what was received", alloc, sent, claim)
	}
}

func TestReadFrameMax(t *testing.T) {
	body := bytes.Repeat([]byte{'x'}, 100)
	frame := append(AppendHeader(nil, Header{Version: V4, Stream: 7, Opcode: OpQuery, Length: 100}), body...)
	tests := []struct {
		name    string
		max     int
		wantErr error
	}{
		{"fits exactly", 109, nil},
		{"one byte over", 108, ErrFrameTooBig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, got, _, err := ReadFrameMax(bytes.NewReader(frame), nil, tt.max)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if h.Stream != 7 {
				t.Fatalf("stream = %d, want 7 (the claimed stream is answered)", h.Stream)
			}
			if err == nil && !bytes.Equal(got, body) {
				t.Fatalf("body = %q", got)
			}
		})
	}
	if got, want := FrameTooBigMessage(100, 108), "Request is too big: length 109 exceeds maximum allowed length 108."; got != want {
		t.Fatalf("message = %q, want %q", got, want)
	}
}

// TestParseHeaderErrors checks that a header ParseHeader refuses still gives its fields
// when all 9 bytes are there, so that a server can answer on the frame's stream.
func TestParseHeaderErrors(t *testing.T) {
	for _, tt := range []struct {
		name    string
		b       []byte
		want    Header
		wantErr error
	}{
		{name: "version 6", b: AppendHeader(nil, Header{Version: 6, Stream: 7, Opcode: OpQuery, Length: 3}),
			want: Header{Version: 6, Stream: 7, Opcode: OpQuery, Length: 3}, wantErr: &UnsupportedVersionError{Version: 6}},
		{name: "response of version 6", b: AppendHeader(nil, Header{Version: ResponseBit | 6, Stream: -1}),
			want: Header{Version: ResponseBit | 6, Stream: -1}, wantErr: &UnsupportedVersionError{Version: 6}},
		{name: "version 2", b: AppendHeader(nil, Header{Version: 2, Stream: 1}),
			want: Header{Version: 2, Stream: 1}, wantErr: &UnsupportedVersionError{Version: 2}},
		{name: "too big", b: AppendHeader(nil, Header{Version: V4, Stream: 2, Length: MaxBodySize + 1}),
			want: Header{Version: V4, Stream: 2, Length: MaxBodySize + 1}, wantErr: ErrFrameTooBig},
		{name: "short with version 6", b: []byte{6, 0, 0}, wantErr: &UnsupportedVersionError{Version: 6}},
		{name: "short", b: []byte{V4, 0, 0}, wantErr: io.ErrUnexpectedEOF},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, err := ParseHeader(tt.b)
			if h != tt.want {
				t.Errorf("got header %+v; want %+v", h, tt.want)
			}
			if err == nil || err.Error() != tt.wantErr.Error() {
				t.Errorf("got error %v; want %v", err, tt.wantErr)
			}
		})
	}
}
