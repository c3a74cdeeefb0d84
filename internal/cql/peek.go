package cql

// The readers in this file take one thing from a response body without decoding the
// message, for the per-request code of tracing and statement statistics: they allocate
// nothing, and they read no further than the thing they return, so that they also work on
// the start of a body (LZ4Prefix). Each agrees with the full decoder (DecodeResult) on
// every body that decodes, and on a body cut short either returns what the whole body
// holds or reports that it cannot.

// SkipResponsePrefix returns the rest of a (decompressed) response body after the prefix
// parts that flags announce, as ParseResponsePrefix does, without reading the warnings and
// the custom payload into a ResponsePrefix. The rest aliases body.
func SkipResponsePrefix(flags byte, body []byte) ([]byte, error) {
	if flags&(FlagTracing|FlagWarning|FlagCustomPayload) == 0 {
		return body, nil
	}
	d := Decoder{b: body}
	if flags&FlagTracing != 0 {
		d.take(16)
	}
	if flags&FlagWarning != 0 {
		for n := d.Short(); n > 0 && d.err == nil; n-- {
			d.StringBytes()
		}
	}
	if flags&FlagCustomPayload != 0 {
		for n := d.Short(); n > 0 && d.err == nil; n-- {
			d.StringBytes()
			d.Bytes()
		}
	}
	if d.err != nil {
		return nil, d.err
	}
	return d.b, nil
}

// RowsCount returns the row count of a RESULT body (after its response prefix) of kind
// Rows. ok is false for any other result and for a body that cannot be read up to the
// count. The cells are not read: a body cut anywhere after the count, such as the start
// that LZ4Prefix decompresses, gives the count of the whole body, and one cut before it
// gives ok false, never a wrong count.
func RowsCount(body []byte) (n int, ok bool) {
	n, _, ok = RowsPage(body)
	return n, ok
}

// RowsPage is RowsCount that also returns the paging state of a page that has more after
// it (nil for the last page); it aliases body.
func RowsPage(body []byte) (n int, pagingState []byte, ok bool) {
	d := Decoder{b: body}
	if d.Int() != ResultRows {
		return 0, nil, false
	}
	flags := d.Int()
	cols := d.Int()
	if cols < 0 {
		return 0, nil, false
	}
	if flags&RowsHasMorePages != 0 {
		pagingState = d.Bytes()
	}
	if flags&RowsMetadataChanged != 0 {
		d.ShortBytes()
	}
	if flags&RowsNoMetadata == 0 {
		d.skipColumns(int(cols), flags&RowsGlobalTableSpec != 0)
	}
	c := d.Int()
	if d.err != nil || c < 0 {
		return 0, nil, false
	}
	return int(c), pagingState, true
}

// PreparedInfo is what ReadPrepared reads of a RESULT Prepared. Its slices alias the body.
type PreparedInfo struct {
	// ID is the statement id that EXECUTEs name.
	ID []byte
	// Keyspace is the keyspace of the first bound variable (from the global table spec or
	// its own), nil when there are none or the body ends or is malformed before it.
	Keyspace []byte
	// ResultColumns is the column count of the result metadata, -1 when the body ends or
	// is malformed before it.
	ResultColumns int
	// ResultMetadataID (protocol v5) is the id of the result metadata, which an EXECUTE
	// of the statement names; nil before v5.
	ResultMetadataID []byte
}

// ReadPrepared reads the statement id, the keyspace and the result column count of a
// RESULT body (after its response prefix) of kind Prepared and of protocol version. ok is
// false for any other result and when the id cannot be read; the rest is read as far as
// the body allows.
func ReadPrepared(body []byte, version byte) (p PreparedInfo, ok bool) {
	d := Decoder{b: body}
	if d.Int() != ResultPrepared {
		return PreparedInfo{}, false
	}
	p = PreparedInfo{ID: d.ShortBytes(), ResultColumns: -1}
	if d.err != nil {
		return PreparedInfo{}, false
	}
	if version >= V5 {
		p.ResultMetadataID = d.ShortBytes()
	}
	flags := d.Int()
	n := d.Int()
	if version >= V4 {
		k := d.Int() // partition key indexes, a [short] each
		if k < 0 {
			d.fail()
		}
		d.take(2 * int(k))
	}
	if n < 0 {
		d.fail()
	}
	p.Keyspace = d.skipColumns(int(n), flags&RowsGlobalTableSpec != 0)
	d.Int() // flags of the result metadata
	if c := d.Int(); d.err == nil && c >= 0 {
		p.ResultColumns = int(c)
	}
	return p, true
}

// skipColumns reads n column specs as columns does, without building them, and returns
// the keyspace of the first (nil when n is 0 or it cannot be read).
func (d *Decoder) skipColumns(n int, global bool) (keyspace []byte) {
	var ks []byte
	if global {
		ks = d.StringBytes()
		d.StringBytes()
	}
	for i := 0; i < n && d.err == nil; i++ {
		if !global {
			k := d.StringBytes()
			d.StringBytes()
			if i == 0 {
				ks = k
			}
		}
		if i == 0 && d.err == nil {
			keyspace = ks
		}
		d.StringBytes()
		d.SkipTypeInfo()
	}
	return keyspace
}
