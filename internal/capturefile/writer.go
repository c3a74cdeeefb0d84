package capturefile

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/golang/snappy"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Writer writes a capture file as a stream of chunks. Entries are gathered in memory and
// written as a chunk when MaxChunk is reached or Flush is called. A Writer is not safe for
// concurrent use.
type Writer struct {
	w       io.Writer
	raw     []byte // the entries of the chunk being gathered
	comp    []byte
	scratch []byte
	written int64 // bytes written to w
	err     error
	// names of keyspaces in use, by name
	names map[string]uint32
	// protocol versions of connections, by number
	conns  map[uint32]byte
	lastAt int64
}

// NewWriter writes the preamble to w and returns a Writer. Its first entry must be the
// header.
func NewWriter(w io.Writer) (*Writer, error) {
	cw := &Writer{w: w, names: map[string]uint32{}, conns: map[uint32]byte{}}
	pre := make([]byte, 0, len(Magic)+2)
	pre = append(pre, Magic...)
	pre = binary.BigEndian.AppendUint16(pre, Version)
	if _, err := w.Write(pre); err != nil {
		return nil, err
	}
	cw.written = int64(len(pre))
	return cw, nil
}

// Written returns the bytes written to the underlying writer so far: the file's size,
// but for the entries not yet flushed.
func (w *Writer) Written() int64 { return w.written }

// Pending returns the raw bytes of the entries not yet flushed.
func (w *Writer) Pending() int { return len(w.raw) }

// Err returns the first write error.
func (w *Writer) Err() error { return w.err }

// Header writes the header entry.
func (w *Writer) Header(h Header) error {
	h.Format = Version
	if h.KeyHash == "" {
		h.KeyHash = KeyHash
	}
	return w.json(KindHeader, h)
}

// Keyspace writes a keyspace entry.
func (w *Writer) Keyspace(k Keyspace) error { return w.json(KindKeyspace, k) }

// Table writes a table entry.
func (w *Writer) Table(t Table) error { return w.json(KindTable, t) }

// Statement writes a statement entry.
func (w *Writer) Statement(s Statement) error { return w.json(KindStatement, s) }

// End writes the end entry and flushes.
func (w *Writer) End(e End) error {
	if err := w.json(KindEnd, e); err != nil {
		return err
	}
	return w.Flush()
}

func (w *Writer) json(k Kind, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return w.entry(k, b)
}

// entry appends one entry, flushing the chunk first when it would not fit.
func (w *Writer) entry(k Kind, payload []byte) error {
	if w.err != nil {
		return w.err
	}
	n := 1 + binary.MaxVarintLen64 + len(payload)
	if n > MaxChunk {
		return fmt.Errorf("capture entry of %d bytes: over the %d bytes of a chunk", len(payload), MaxChunk)
	}
	if len(w.raw)+n > MaxChunk {
		if err := w.Flush(); err != nil {
			return err
		}
	}
	w.raw = append(w.raw, byte(k))
	w.raw = binary.AppendUvarint(w.raw, uint64(len(payload)))
	w.raw = append(w.raw, payload...)
	return nil
}

// name returns the id of keyspace name ks, writing its entry when it is new.
func (w *Writer) name(ks string) (uint32, error) {
	if ks == "" {
		return 0, nil
	}
	if id, ok := w.names[ks]; ok {
		return id, nil
	}
	id := uint32(len(w.names) + 1)
	if err := w.json(KindName, Name{ID: id, Name: ks}); err != nil {
		return 0, err
	}
	w.names[ks] = id
	return id, nil
}

// ErrValueTooLong is returned by Record for a value of values=keep that makes the record
// longer than a chunk.
var ErrValueTooLong = errors.New("record longer than a chunk")

// Record writes a record entry. keep says whether the parts' values are written.
func (w *Writer) Record(r *Record, keep bool) error {
	ks, err := w.name(r.Keyspace)
	if err != nil {
		return err
	}
	if v, ok := w.conns[r.Conn]; r.ProtocolVersion != 0 && (!ok || v != r.ProtocolVersion) {
		if err := w.json(KindConn, Conn{Conn: r.Conn, ProtocolVersion: r.ProtocolVersion}); err != nil {
			return err
		}
		w.conns[r.Conn] = r.ProtocolVersion
	}
	b := w.scratch[:0]
	b = binary.AppendVarint(b, r.AtUS-w.lastAt)
	w.lastAt = r.AtUS
	b = binary.AppendUvarint(b, uint64(r.Conn))
	b = append(b, r.Opcode, r.Flags)
	b = binary.AppendUvarint(b, uint64(ks))
	b = binary.AppendUvarint(b, uint64(r.Consistency+1))
	b = binary.AppendUvarint(b, uint64(r.Serial+1))
	b = binary.AppendVarint(b, int64(r.PageSize))
	b = append(b, r.QueryFlags)
	b = binary.AppendVarint(b, int64(r.BatchType))
	b = binary.AppendUvarint(b, uint64(len(r.Parts)))
	for i := range r.Parts {
		p := &r.Parts[i]
		b = binary.AppendUvarint(b, uint64(p.Statement))
		b = binary.AppendUvarint(b, uint64(len(p.Lens)))
		for j, n := range p.Lens {
			if keep && n > 0 && (j >= len(p.Values) || p.Values[j] == nil) {
				n = LenUnknown // a value withheld even with values=keep: a literal, a password
			}
			b = binary.AppendVarint(b, int64(n))
			if keep && n > 0 && j < len(p.Values) {
				b = append(b, p.Values[j][:n]...)
			}
		}
		if len(p.Key) == KeyLen {
			b = append(b, 1)
			b = append(b, p.Key...)
		} else {
			b = append(b, 0)
		}
	}
	b = append(b, r.RespOpcode)
	switch r.RespOpcode {
	case OpResult:
		b = binary.AppendVarint(b, int64(r.ResultKind))
	case OpError:
		b = binary.AppendVarint(b, int64(r.ErrorCode))
	default:
		b = binary.AppendVarint(b, 0)
	}
	b = binary.AppendVarint(b, int64(r.Rows))
	b = binary.AppendUvarint(b, uint64(max(r.LatencyUS, 0)))
	b = binary.AppendUvarint(b, uint64(r.ReqBytes))
	b = binary.AppendUvarint(b, uint64(r.RespBytes))
	w.scratch = b
	if len(b)+1+binary.MaxVarintLen64 > MaxChunk {
		return ErrValueTooLong
	}
	return w.entry(KindRecord, b)
}

// Flush writes the entries gathered so far as one chunk.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	if len(w.raw) == 0 {
		return nil
	}
	w.comp = snappy.Encode(w.comp[:cap(w.comp)], w.raw)
	hdr := make([]byte, 0, 2*binary.MaxVarintLen64+4)
	hdr = binary.AppendUvarint(hdr, uint64(len(w.raw)))
	hdr = binary.AppendUvarint(hdr, uint64(len(w.comp)))
	hdr = binary.BigEndian.AppendUint32(hdr, crc32.Checksum(w.raw, castagnoli))
	for _, part := range [][]byte{hdr, w.comp} {
		n, err := w.w.Write(part)
		w.written += int64(n)
		if err != nil {
			w.err = err
			return err
		}
	}
	w.raw = w.raw[:0]
	return nil
}
