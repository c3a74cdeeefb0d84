package statements

import "encoding/binary"

// RowsPrefix is how much of a compressed RESULT body is decompressed to read its row
// count: enough for the metadata of a result of dozens of columns. A result whose metadata
// is longer has its rows not counted.
const RowsPrefix = 1024

// LZ4Prefix decompresses at most max bytes from the start of a CQL lz4 body (a 4-byte
// big-endian uncompressed length, then an lz4 block) into dst[:0], and returns them; nil
// when src is malformed. It does not allocate when dst has room for max bytes, and reads
// only as much of src as the prefix needs.
func LZ4Prefix(dst, src []byte, max int) []byte {
	if len(src) < 4 {
		return nil
	}
	if total := int(binary.BigEndian.Uint32(src)); total < max {
		max = total
	}
	src = src[4:]
	out := dst[:0]
	i := 0
	for i < len(src) && len(out) < max {
		tok := src[i]
		i++
		lit := int(tok >> 4)
		if lit == 15 {
			for {
				if i >= len(src) {
					return nil
				}
				b := src[i]
				i++
				lit += int(b)
				if b != 255 {
					break
				}
			}
		}
		if lit > len(src)-i {
			return nil
		}
		out = append(out, src[i:i+min(lit, max-len(out))]...)
		i += lit
		if len(out) >= max || i >= len(src) {
			break
		}
		if i+2 > len(src) {
			return nil
		}
		off := int(src[i]) | int(src[i+1])<<8
		i += 2
		ml := int(tok & 15)
		if ml == 15 {
			for {
				if i >= len(src) {
					return nil
				}
				b := src[i]
				i++
				ml += int(b)
				if b != 255 {
					break
				}
			}
		}
		ml += 4
		if off == 0 || off > len(out) {
			return nil
		}
		for k := 0; k < ml && len(out) < max; k++ {
			out = append(out, out[len(out)-off])
		}
	}
	return out
}
