package cql

// RESULT kinds.
const (
	ResultVoid         int32 = 1
	ResultRows         int32 = 2
	ResultSetKeyspace  int32 = 3
	ResultPrepared     int32 = 4
	ResultSchemaChange int32 = 5
)

// Rows metadata flags.
const (
	RowsGlobalTableSpec int32 = 0x01
	RowsHasMorePages    int32 = 0x02
	RowsNoMetadata      int32 = 0x04
	// RowsMetadataChanged (protocol v5) says that the result metadata of the prepared
	// statement changed since the id the EXECUTE named: the metadata is sent in full, with
	// its new id (RowsMetadata.NewMetadataID), which later EXECUTEs name.
	RowsMetadataChanged int32 = 0x08
)

// ColumnSpec describes one column of a result or one bound variable of a prepared
// statement. It is safe for concurrent use when not modified.
type ColumnSpec struct {
	Keyspace, Table, Name string
	Type                  TypeInfo
}

// RowsMetadata is the <metadata> of a Rows result, and the result metadata of a Prepared
// result. It is safe for concurrent use when not modified.
//
// When encoding, RowsGlobalTableSpec is computed (set when there is at least one column and
// all share a keyspace and table), RowsHasMorePages is set when Flags has it or PagingState
// is not nil, and with RowsNoMetadata ColumnCount is written and Columns are not; otherwise
// len(Columns) is written as the count. When decoding, Flags and ColumnCount are as on the
// wire, and every column carries its keyspace and table even when the wire used a global
// table spec.
//
// NewMetadataID, with RowsMetadataChanged in Flags, is written after the paging state and
// read back from there.
type RowsMetadata struct {
	Flags         int32
	ColumnCount   int
	PagingState   []byte
	NewMetadataID []byte
	Columns       []ColumnSpec
}

// PreparedMetadata is the <metadata> of a Prepared result: the bound variables. PKIndexes
// (protocol v4 only) lists the bound variables that make the partition key, in key order; v3
// neither writes nor reads it. RowsGlobalTableSpec in Flags is computed when encoding. It is
// safe for concurrent use when not modified.
type PreparedMetadata struct {
	Flags     int32
	PKIndexes []uint16
	Columns   []ColumnSpec
}

// globalSpec reports whether all columns share one keyspace and table.
func globalSpec(cols []ColumnSpec) bool {
	if len(cols) == 0 {
		return false
	}
	for _, c := range cols[1:] {
		if c.Keyspace != cols[0].Keyspace || c.Table != cols[0].Table {
			return false
		}
	}
	return true
}

func appendColumns(b []byte, global bool, cols []ColumnSpec) []byte {
	if global {
		b = AppendString(AppendString(b, cols[0].Keyspace), cols[0].Table)
	}
	for _, c := range cols {
		if !global {
			b = AppendString(AppendString(b, c.Keyspace), c.Table)
		}
		b = AppendTypeInfo(AppendString(b, c.Name), c.Type)
	}
	return b
}

// AppendRowsMetadata appends md as a Rows <metadata>.
func AppendRowsMetadata(b []byte, md RowsMetadata) []byte {
	flags := md.Flags &^ RowsGlobalTableSpec
	if md.PagingState != nil {
		flags |= RowsHasMorePages
	}
	n := md.ColumnCount
	global := false
	if flags&RowsNoMetadata == 0 {
		n = len(md.Columns)
		if global = globalSpec(md.Columns); global {
			flags |= RowsGlobalTableSpec
		}
	}
	b = AppendInt(AppendInt(b, flags), int32(n))
	if flags&RowsHasMorePages != 0 {
		b = AppendBytes(b, md.PagingState)
	}
	if flags&RowsMetadataChanged != 0 {
		b = AppendShortBytes(b, md.NewMetadataID)
	}
	if flags&RowsNoMetadata == 0 {
		b = appendColumns(b, global, md.Columns)
	}
	return b
}

// columns reads n column specs, with a global table spec when global is true.
func (d *Decoder) columns(n int, global bool) []ColumnSpec {
	// A column spec takes at least 4 bytes: a name length and a type id.
	if d.err != nil || n < 0 || int64(n)*4 > int64(len(d.b)) {
		d.fail()
		return nil
	}
	var ks, table string
	if global {
		ks, table = d.String(), d.String()
	}
	if n == 0 {
		return nil
	}
	cols := make([]ColumnSpec, n)
	for i := 0; i < n && d.err == nil; i++ {
		c := &cols[i]
		if global {
			c.Keyspace, c.Table = ks, table
		} else {
			c.Keyspace, c.Table = d.String(), d.String()
		}
		c.Name = d.String()
		c.Type = d.TypeInfo()
	}
	return cols
}

// RowsMetadata reads a Rows <metadata>.
func (d *Decoder) RowsMetadata() RowsMetadata {
	md := RowsMetadata{Flags: d.Int()}
	n := d.Int()
	if n < 0 {
		d.fail()
		return RowsMetadata{}
	}
	md.ColumnCount = int(n)
	if md.Flags&RowsHasMorePages != 0 {
		md.PagingState = d.Bytes()
	}
	if md.Flags&RowsMetadataChanged != 0 {
		md.NewMetadataID = d.ShortBytes()
	}
	if md.Flags&RowsNoMetadata == 0 {
		md.Columns = d.columns(md.ColumnCount, md.Flags&RowsGlobalTableSpec != 0)
	}
	return md
}

// AppendPreparedMetadata appends md as a Prepared <metadata> for the given version.
func AppendPreparedMetadata(b []byte, md PreparedMetadata, version byte) []byte {
	flags := md.Flags &^ RowsGlobalTableSpec
	global := globalSpec(md.Columns)
	if global {
		flags |= RowsGlobalTableSpec
	}
	b = AppendInt(AppendInt(b, flags), int32(len(md.Columns)))
	if version >= V4 {
		b = AppendInt(b, int32(len(md.PKIndexes)))
		for _, i := range md.PKIndexes {
			b = AppendShort(b, i)
		}
	}
	return appendColumns(b, global, md.Columns)
}

// PreparedMetadata reads a Prepared <metadata> of the given version.
func (d *Decoder) PreparedMetadata(version byte) PreparedMetadata {
	md := PreparedMetadata{Flags: d.Int()}
	n := int(d.Int())
	if version >= V4 {
		k := int(d.Int())
		if d.err != nil || k < 0 || int64(k)*2 > int64(len(d.b)) {
			d.fail()
			return PreparedMetadata{}
		}
		if k > 0 {
			md.PKIndexes = make([]uint16, k)
			for i := range md.PKIndexes {
				md.PKIndexes[i] = d.Short()
			}
		}
	}
	md.Columns = d.columns(n, md.Flags&RowsGlobalTableSpec != 0)
	return md
}

// VoidResult is a RESULT of kind Void. It is safe for concurrent use.
type VoidResult struct{}

// Opcode returns OpResult.
func (VoidResult) Opcode() Opcode { return OpResult }

// AppendBody appends the kind.
func (VoidResult) AppendBody(b []byte, _ byte) []byte { return AppendInt(b, ResultVoid) }

// RowsResult is a RESULT of kind Rows. Rows[i][j] is the raw value of column j in row i; a
// nil cell is null. It is safe for concurrent use when not modified.
type RowsResult struct {
	Metadata RowsMetadata
	Rows     [][][]byte
}

// Opcode returns OpResult.
func (RowsResult) Opcode() Opcode { return OpResult }

// AppendBody appends the kind, the metadata, the row count and the cells. Every row must
// have as many cells as there are columns.
func (m RowsResult) AppendBody(b []byte, _ byte) []byte {
	b = AppendRowsHeader(b, m.Metadata, len(m.Rows))
	for _, row := range m.Rows {
		for _, cell := range row {
			b = AppendBytes(b, cell)
		}
	}
	return b
}

// AppendRowsHeader appends the start of a Rows RESULT body: the kind, md and the row count.
// The caller then appends rowCount rows of cells with AppendBytes, which lets a server
// stream rows without building [][][]byte.
func AppendRowsHeader(b []byte, md RowsMetadata, rowCount int) []byte {
	b = AppendInt(b, ResultRows)
	b = AppendRowsMetadata(b, md)
	return AppendInt(b, int32(rowCount))
}

// SetKeyspaceResult is a RESULT of kind Set_keyspace, the answer to USE. It is safe for
// concurrent use.
type SetKeyspaceResult struct{ Keyspace string }

// Opcode returns OpResult.
func (SetKeyspaceResult) Opcode() Opcode { return OpResult }

// AppendBody appends the kind and the keyspace.
func (m SetKeyspaceResult) AppendBody(b []byte, _ byte) []byte {
	return AppendString(AppendInt(b, ResultSetKeyspace), m.Keyspace)
}

// PreparedResult is a RESULT of kind Prepared. It is safe for concurrent use when not
// modified.
type PreparedResult struct {
	ID []byte
	// ResultMetadataID (protocol v5) identifies ResultMetadata: EXECUTEs name it, and a
	// Rows result tells when it changed (RowsMetadataChanged).
	ResultMetadataID []byte
	Metadata         PreparedMetadata
	ResultMetadata   RowsMetadata
}

// Opcode returns OpResult.
func (PreparedResult) Opcode() Opcode { return OpResult }

// AppendBody appends the kind, the id (and from v5 on the result metadata id) and both
// metadata.
func (m PreparedResult) AppendBody(b []byte, version byte) []byte {
	b = AppendShortBytes(AppendInt(b, ResultPrepared), m.ID)
	if version >= V5 {
		b = AppendShortBytes(b, m.ResultMetadataID)
	}
	b = AppendPreparedMetadata(b, m.Metadata, version)
	return AppendRowsMetadata(b, m.ResultMetadata)
}

// SchemaChangeResult is a RESULT of kind Schema_change. It is safe for concurrent use when
// not modified.
type SchemaChangeResult struct{ Change SchemaChange }

// Opcode returns OpResult.
func (SchemaChangeResult) Opcode() Opcode { return OpResult }

// AppendBody appends the kind and the change.
func (m SchemaChangeResult) AppendBody(b []byte, _ byte) []byte {
	return appendSchemaChange(AppendInt(b, ResultSchemaChange), m.Change)
}

// DecodeResult decodes a RESULT body. It returns a value (never a pointer) of type
// VoidResult, RowsResult, SetKeyspaceResult, PreparedResult or SchemaChangeResult. Byte
// slices in the result, including the cells of rows, alias body.
func DecodeResult(body []byte, version byte) (Message, error) {
	d := Decoder{b: body}
	var m Message
	switch d.Int() {
	case ResultVoid:
		m = VoidResult{}
	case ResultRows:
		m = d.rows()
	case ResultSetKeyspace:
		m = SetKeyspaceResult{Keyspace: d.String()}
	case ResultPrepared:
		r := PreparedResult{ID: d.ShortBytes()}
		if version >= V5 {
			r.ResultMetadataID = d.ShortBytes()
		}
		r.Metadata = d.PreparedMetadata(version)
		r.ResultMetadata = d.RowsMetadata()
		m = r
	case ResultSchemaChange:
		m = SchemaChangeResult{Change: decodeSchemaChange(&d)}
	default:
		d.fail()
	}
	if err := finish(&d); err != nil {
		return nil, err
	}
	return m, nil
}

func (d *Decoder) rows() RowsResult {
	r := RowsResult{Metadata: d.RowsMetadata()}
	n := int64(d.Int())
	cols := int64(r.Metadata.ColumnCount)
	// Every cell takes at least 4 bytes; divide rather than multiply so nothing overflows.
	if d.err != nil || n < 0 || (cols == 0 && n > 0) || (cols > 0 && n > int64(len(d.b))/4/cols) {
		d.fail()
		return RowsResult{}
	}
	if n == 0 {
		return r
	}
	cells := make([][]byte, n*cols)
	r.Rows = make([][][]byte, n)
	for i := range r.Rows {
		row := cells[int64(i)*cols : int64(i+1)*cols : int64(i+1)*cols]
		for j := range row {
			row[j] = d.Bytes()
		}
		r.Rows[i] = row
	}
	return r
}
