package cql

import "encoding/binary"

// LZ4Prefix decompresses the first max bytes of a CQL lz4 body (a 4-byte big-endian
// uncompressed length, then an lz4 block) into dst[:0] and returns them: all of the body
// when it is shorter than max. It returns nil when src is malformed, including a block
// that ends before those bytes. It does not allocate when dst has room for max bytes, and
// reads only as much of src as the prefix needs.
func LZ4Prefix(dst, src []byte, max int) []byte {
	if len(src) < 4 {
		return nil
	}
	if total := int(binary.BigEndian.Uint32(src)); total < max {
		max = total
	}
	src = src[4:]
	out := dst[:0]
	if out == nil {
		out = []byte{} // an empty body is not a malformed one
	}
	i := 0
	for i < len(src) && len(out) < max {
		tok := src[i]
		i++
		lit, ok := lz4Length(src, &i, int(tok>>4))
		if !ok || lit > len(src)-i {
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
		ml, ok := lz4Length(src, &i, int(tok&15))
		if !ok {
			return nil
		}
		ml += 4
		if off == 0 || off > len(out) {
			return nil
		}
		out = copyBack(out, off, min(ml, max-len(out)))
	}
	if len(out) < max {
		return nil
	}
	return out
}

// lz4Length completes a literal or match length n read from a token: 15 is followed by
// bytes that add to it until one is not 255.
func lz4Length(src []byte, i *int, n int) (int, bool) {
	if n != 15 {
		return n, true
	}
	for *i < len(src) {
		b := src[*i]
		*i++
		n += int(b)
		if n > MaxBodySize {
			return 0, false
		}
		if b != 255 {
			return n, true
		}
	}
	return 0, false
}

// copyBack appends n bytes copied from off bytes back in out, which the copy may overlap.
// 0 < off <= len(out).
func copyBack(out []byte, off, n int) []byte {
	for n > 0 {
		// Each round copies at most off bytes, so that it never reads what it writes.
		k := min(n, off)
		out = append(out, out[len(out)-off:len(out)-off+k]...)
		n -= k
	}
	return out
}

// SnappyPrefix decompresses the first max bytes of a snappy block (the Snappy body
// compression: a varint uncompressed length, then literal and copy elements) into dst[:0]
// and returns them: all of the body when it is shorter than max. It returns nil when src
// is malformed, including a block that ends before those bytes. It does not allocate when
// dst has room for max bytes, and reads only as much of src as the prefix needs.
func SnappyPrefix(dst, src []byte, max int) []byte {
	total, i := binary.Uvarint(src)
	if i <= 0 || total > 0xffffffff {
		return nil
	}
	if total < uint64(max) {
		max = int(total)
	}
	out := dst[:0]
	if out == nil {
		out = []byte{}
	}
	for len(out) < max {
		if i >= len(src) {
			return nil
		}
		tag := src[i]
		i++
		var n, off int
		switch tag & 3 {
		case 0: // literal: its length-1 in the tag, or in the 1 to 4 bytes that follow
			n = int(tag >> 2)
			if n >= 60 {
				k := n - 59
				if k > len(src)-i {
					return nil
				}
				n = 0
				for j := k - 1; j >= 0; j-- {
					n = n<<8 | int(src[i+j])
				}
				i += k
			}
			n++
			if n > len(src)-i {
				return nil
			}
			out = append(out, src[i:i+min(n, max-len(out))]...)
			i += n
			continue
		case 1: // copy, 1-byte offset: length 4 to 11, an 11-bit offset
			if i >= len(src) {
				return nil
			}
			n = 4 + int(tag>>2&7)
			off = int(tag>>5)<<8 | int(src[i])
			i++
		case 2: // copy, 2-byte offset
			if i+2 > len(src) {
				return nil
			}
			n = 1 + int(tag>>2)
			off = int(binary.LittleEndian.Uint16(src[i:]))
			i += 2
		case 3: // copy, 4-byte offset
			if i+4 > len(src) {
				return nil
			}
			n = 1 + int(tag>>2)
			off = int(binary.LittleEndian.Uint32(src[i:]))
			i += 4
		}
		if off <= 0 || off > len(out) {
			return nil
		}
		out = copyBack(out, off, min(n, max-len(out)))
	}
	return out
}
