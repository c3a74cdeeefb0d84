package capturefile

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"

	"github.com/golang/snappy"
)

// Errors of a file that cannot be read; Reader wraps them with where it found them.
var (
	// ErrNotCapture is a file that does not start with Magic.
	ErrNotCapture = errors.New("not a tracecar capture file")
	// ErrTruncated is a file that ends before its end entry: the capture was cut short,
	// or the file is still being written.
	ErrTruncated = errors.New("truncated")
	// ErrCorrupt is a chunk or an entry that does not decode.
	ErrCorrupt = errors.New("corrupt")
)

// VersionError is a file of a format version this package does not read.
type VersionError struct{ Version uint16 }

func (e *VersionError) Error() string {
	return fmt.Sprintf("capture format version %d: this tracecar reads version %d", e.Version, Version)
}

// Entry is one entry read: its Kind and the field of that kind.
type Entry struct {
	Kind      Kind
	Header    *Header
	Keyspace  *Keyspace
	Table     *Table
	Statement *Statement
	Name      *Name
	Conn      *Conn
	Record    *Record
	End       *End
}

// Reader reads a capture file entry by entry. It is not safe for concurrent use.
type Reader struct {
	r      *bufio.Reader
	off    int64 // the file offset of the next chunk
	chunk  []byte
	comp   []byte
	rest   []byte // entries of the current chunk not yet read
	keep   bool
	names  map[uint32]string
	conns  map[uint32]byte // protocol versions
	lastAt int64
	seen   int // entries read
	ended  bool
	// Records counts the records read so far.
	Records int
}

// NewReader reads the preamble from r and returns a Reader.
func NewReader(r io.Reader) (*Reader, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	pre := make([]byte, len(Magic)+2)
	n, err := io.ReadFull(br, pre)
	if m := min(n, len(Magic)); string(pre[:m]) != Magic[:m] {
		return nil, ErrNotCapture
	}
	if err != nil {
		if n == 0 {
			return nil, fmt.Errorf("%w: the file is empty", ErrTruncated)
		}
		return nil, fmt.Errorf("%w: in the preamble", ErrTruncated)
	}
	if v := binary.BigEndian.Uint16(pre[len(Magic):]); v != Version {
		return nil, &VersionError{Version: v}
	}
	return &Reader{r: br, off: int64(len(pre)), names: map[uint32]string{}, conns: map[uint32]byte{}}, nil
}

// Next returns the next entry. At the end of a file that ends with its end entry it returns
// io.EOF; at the end of any other it returns an error wrapping ErrTruncated. An error
// wrapping ErrCorrupt names the offset of the chunk at fault.
func (r *Reader) Next() (Entry, error) {
	for len(r.rest) == 0 {
		if err := r.readChunk(); err != nil {
			return Entry{}, err
		}
	}
	at := r.off
	kind := Kind(r.rest[0])
	n, k := binary.Uvarint(r.rest[1:])
	if k <= 0 || n > uint64(len(r.rest)-1-k) {
		return Entry{}, fmt.Errorf("%w: an entry overruns its chunk (before byte %d)", ErrCorrupt, at)
	}
	payload := r.rest[1+k : 1+k+int(n)]
	r.rest = r.rest[1+k+int(n):]
	if r.ended {
		return Entry{}, fmt.Errorf("%w: an entry after the end entry (before byte %d)", ErrCorrupt, at)
	}
	if r.seen == 0 && kind != KindHeader {
		return Entry{}, fmt.Errorf("%w: the first entry is of kind %d, not the header", ErrCorrupt, kind)
	}
	r.seen++
	e := Entry{Kind: kind}
	var err error
	switch kind {
	case KindHeader:
		e.Header = new(Header)
		err = json.Unmarshal(payload, e.Header)
		if err == nil {
			r.keep = e.Header.Values == ValuesKeep
		}
	case KindKeyspace:
		e.Keyspace = new(Keyspace)
		err = json.Unmarshal(payload, e.Keyspace)
	case KindTable:
		e.Table = new(Table)
		err = json.Unmarshal(payload, e.Table)
	case KindStatement:
		e.Statement = new(Statement)
		err = json.Unmarshal(payload, e.Statement)
	case KindName:
		e.Name = new(Name)
		if err = json.Unmarshal(payload, e.Name); err == nil {
			r.names[e.Name.ID] = e.Name.Name
		}
	case KindConn:
		e.Conn = new(Conn)
		if err = json.Unmarshal(payload, e.Conn); err == nil {
			r.conns[e.Conn.Conn] = e.Conn.ProtocolVersion
		}
	case KindRecord:
		e.Record, err = r.record(payload)
		if err == nil {
			e.Record.ProtocolVersion = r.conns[e.Record.Conn]
		}
		r.Records++
	case KindEnd:
		e.End = new(End)
		err = json.Unmarshal(payload, e.End)
		r.ended = true
	default:
		return Entry{}, fmt.Errorf("%w: unknown entry kind %d (before byte %d)", ErrCorrupt, kind, at)
	}
	if err != nil {
		return Entry{}, fmt.Errorf("%w: entry of kind %d before byte %d: %v", ErrCorrupt, kind, at, err)
	}
	return e, nil
}

// readChunk reads and checks the next chunk.
func (r *Reader) readChunk() error {
	at := r.off
	rawLen, err := binary.ReadUvarint(r.r)
	if err == io.EOF {
		if r.ended {
			return io.EOF
		}
		return fmt.Errorf("%w: the file ends at byte %d after %d records, without its end entry "+
			"(the capture was cut short, or is still being written)", ErrTruncated, at, r.Records)
	}
	compLen, err2 := binary.ReadUvarint(r.r)
	var sum [4]byte
	_, err3 := io.ReadFull(r.r, sum[:])
	if err = errors.Join(err, err2, err3); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%w: the file ends inside the chunk at byte %d, after %d records", ErrTruncated, at, r.Records)
		}
		return fmt.Errorf("%w: chunk at byte %d: %v", ErrCorrupt, at, err)
	}
	if rawLen == 0 || rawLen > MaxChunk || compLen > uint64(snappy.MaxEncodedLen(MaxChunk)) {
		return fmt.Errorf("%w: chunk at byte %d: lengths %d and %d out of range", ErrCorrupt, at, rawLen, compLen)
	}
	if cap(r.comp) < int(compLen) {
		r.comp = make([]byte, compLen)
	}
	r.comp = r.comp[:compLen]
	if _, err := io.ReadFull(r.r, r.comp); err != nil {
		return fmt.Errorf("%w: the file ends inside the chunk at byte %d, after %d records", ErrTruncated, at, r.Records)
	}
	if n, err := snappy.DecodedLen(r.comp); err != nil || n != int(rawLen) {
		return fmt.Errorf("%w: chunk at byte %d does not decompress to its length", ErrCorrupt, at)
	}
	r.chunk, err = snappy.Decode(r.chunk[:cap(r.chunk)], r.comp)
	if err != nil {
		return fmt.Errorf("%w: chunk at byte %d: %v", ErrCorrupt, at, err)
	}
	if crc32.Checksum(r.chunk, castagnoli) != binary.BigEndian.Uint32(sum[:]) {
		return fmt.Errorf("%w: chunk at byte %d: checksum mismatch", ErrCorrupt, at)
	}
	r.off += int64(uvarintLen(rawLen) + uvarintLen(compLen) + 4 + int(compLen))
	r.rest = r.chunk
	return nil
}

func uvarintLen(v uint64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], v)
}

// decoder reads a record's varints.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.bad = true
		d.b = nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.bad = true
		d.b = nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.bad = true
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) bytes(n int) []byte {
	if n < 0 || n > len(d.b) {
		d.bad = true
		d.b = nil
		return nil
	}
	b := append([]byte(nil), d.b[:n]...) // the chunk's buffer is reused
	d.b = d.b[n:]
	return b
}

func (r *Reader) record(p []byte) (*Record, error) {
	d := decoder{b: p}
	rec := &Record{}
	r.lastAt += d.varint()
	rec.AtUS = r.lastAt
	rec.Conn = uint32(d.uvarint())
	rec.Opcode, rec.Flags = d.byte(), d.byte()
	if ks := uint32(d.uvarint()); ks != 0 {
		name, ok := r.names[ks]
		if !ok {
			return nil, fmt.Errorf("keyspace name %d not defined", ks)
		}
		rec.Keyspace = name
	}
	rec.Consistency = int(d.uvarint()) - 1
	rec.Serial = int(d.uvarint()) - 1
	rec.PageSize = int32(d.varint())
	rec.QueryFlags = d.byte()
	rec.BatchType = int(d.varint())
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		return nil, fmt.Errorf("%d parts in a record of %d bytes", n, len(p))
	}
	if n > 0 {
		rec.Parts = make([]Part, n)
	}
	for i := range rec.Parts {
		pt := &rec.Parts[i]
		pt.Statement = uint32(d.uvarint())
		nv := d.uvarint()
		if nv > uint64(len(d.b)) {
			return nil, fmt.Errorf("%d values in a record of %d bytes", nv, len(p))
		}
		if nv > 0 {
			pt.Lens = make([]int32, nv)
			if r.keep {
				pt.Values = make([][]byte, nv)
			}
		}
		for j := range pt.Lens {
			l := d.varint()
			if l < LenUnknown || l > int64(len(p)) && r.keep {
				return nil, fmt.Errorf("value length %d", l)
			}
			pt.Lens[j] = int32(l)
			if r.keep && l > 0 {
				pt.Values[j] = d.bytes(int(l))
			}
		}
		if d.byte() == 1 {
			pt.Key = d.bytes(KeyLen)
		}
	}
	rec.RespOpcode = d.byte()
	v := int32(d.varint())
	switch rec.RespOpcode {
	case OpResult:
		rec.ResultKind = v
	case OpError:
		rec.ErrorCode = v
	}
	rec.Rows = int32(d.varint())
	rec.LatencyUS = int64(d.uvarint())
	rec.ReqBytes = uint32(d.uvarint())
	rec.RespBytes = uint32(d.uvarint())
	if d.bad {
		return nil, errors.New("record cut short")
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%d bytes left after the record", len(d.b))
	}
	return rec, nil
}

// Capture is a whole capture file, read by ReadFile.
type Capture struct {
	Header    Header
	Keyspaces []Keyspace
	Tables    []Table
	// Statements by id.
	Statements map[uint32]*Statement
	Records    []Record
	End        End
}

// Table returns the table ks.name, or nil.
func (c *Capture) Table(ks, name string) *Table {
	for i := range c.Tables {
		if c.Tables[i].Keyspace == ks && c.Tables[i].Name == name {
			return &c.Tables[i]
		}
	}
	return nil
}

// ReadFile reads and checks a whole capture file. Its error names the file and the
// problem: not a capture, an unknown version, truncated, corrupt, or a record that runs a
// statement not defined before it.
func ReadFile(path string) (*Capture, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("capture file: %w", err)
	}
	defer f.Close()
	c, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("capture file %s: %w", path, err)
	}
	return c, nil
}

// Read reads and checks a whole capture from r, as ReadFile does.
func Read(r io.Reader) (*Capture, error) {
	cr, err := NewReader(r)
	if err != nil {
		return nil, err
	}
	c := &Capture{Statements: map[uint32]*Statement{}}
	for {
		e, err := cr.Next()
		if err == io.EOF {
			return c, nil
		}
		if err != nil {
			return nil, err
		}
		switch e.Kind {
		case KindHeader:
			c.Header = *e.Header
		case KindKeyspace:
			c.Keyspaces = append(c.Keyspaces, *e.Keyspace)
		case KindTable:
			c.Tables = append(c.Tables, *e.Table)
		case KindStatement:
			c.Statements[e.Statement.ID] = e.Statement
		case KindRecord:
			for _, p := range e.Record.Parts {
				if p.Statement != 0 && c.Statements[p.Statement] == nil {
					return nil, fmt.Errorf("%w: record %d runs statement %d, which is not defined before it", ErrCorrupt, cr.Records, p.Statement)
				}
			}
			c.Records = append(c.Records, *e.Record)
		case KindEnd:
			c.End = *e.End
		}
	}
}

// Contents returns the bytes of every entry of the capture in r, decompressed and
// checked, as they were written: for an audit of what a file holds, such as a search for
// a value that must not be there, which the compressed bytes could hide.
func Contents(r io.Reader) ([]byte, error) {
	cr, err := NewReader(r)
	if err != nil {
		return nil, err
	}
	var out []byte
	for {
		for len(cr.rest) > 0 {
			if _, err := cr.Next(); err != nil {
				return nil, err
			}
		}
		if err := cr.readChunk(); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		out = append(out, cr.rest...)
	}
}
