package cql

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"sync"
	"time"
)

// ErrBadUUID reports a string that is not a UUID in the 8-4-4-4-12 hex form.
var ErrBadUUID = errors.New("cql: malformed uuid")

// ParseUUID parses a UUID in the canonical 8-4-4-4-12 hexadecimal form, in either case.
func ParseUUID(s string) ([16]byte, error) {
	var u [16]byte
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, ErrBadUUID
	}
	j := 0
	for i := 0; i < 36; {
		if s[i] == '-' {
			i++
			continue
		}
		hi, ok1 := fromHex(s[i])
		lo, ok2 := fromHex(s[i+1])
		if !ok1 || !ok2 {
			return [16]byte{}, ErrBadUUID
		}
		u[j] = hi<<4 | lo
		j++
		i += 2
	}
	return u, nil
}

func fromHex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// FormatUUID returns u in the canonical lower-case 8-4-4-4-12 form.
func FormatUUID(u [16]byte) string {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}

// uuidEpochOffset is the number of 100 ns intervals between 1582-10-15 (the UUID epoch) and
// the Unix epoch.
const uuidEpochOffset = 0x01B21DD213814000

// timeUUIDState makes NewTimeUUID unique: a random node id and clock sequence read once,
// and the last timestamp handed out, so that two calls never give the same UUID and the
// timestamps of one process only go up.
var timeUUIDState struct {
	sync.Mutex
	init  bool
	node  [6]byte
	clock uint16
	last  uint64
}

// NewTimeUUID returns a version-1 UUID carrying t, with a random node id and clock sequence
// read once from crypto/rand. Within a process, UUIDs are unique and their timestamps
// increase: when t is not after the last one handed out, the last one's timestamp plus one
// 100 ns tick is used instead. It is safe for concurrent use.
func NewTimeUUID(t time.Time) [16]byte {
	ts := uint64(t.UnixNano()/100) + uuidEpochOffset
	s := &timeUUIDState
	s.Lock()
	if !s.init {
		var r [8]byte
		if _, err := rand.Read(r[:]); err != nil {
			// crypto/rand does not fail on supported platforms; a fixed node id still gives
			// unique UUIDs within the process.
			r = [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
		}
		copy(s.node[:], r[:6])
		s.node[0] |= 0x01 // multicast bit: a random node id, not a MAC address
		s.clock = binary.BigEndian.Uint16(r[6:]) & 0x3fff
		s.init = true
	}
	if ts <= s.last {
		ts = s.last + 1
	}
	s.last = ts
	node, clock := s.node, s.clock
	s.Unlock()
	return makeTimeUUID(ts, clock, node)
}

func makeTimeUUID(ts uint64, clock uint16, node [6]byte) [16]byte {
	var u [16]byte
	binary.BigEndian.PutUint32(u[0:4], uint32(ts))
	binary.BigEndian.PutUint16(u[4:6], uint16(ts>>32))
	binary.BigEndian.PutUint16(u[6:8], uint16(ts>>48)&0x0fff|0x1000)
	binary.BigEndian.PutUint16(u[8:10], clock&0x3fff|0x8000)
	copy(u[10:], node[:])
	return u
}

// TimeUUIDTime returns the time carried by a version-1 UUID, in UTC with 100 ns precision.
// For other versions the result is meaningless.
func TimeUUIDTime(u [16]byte) time.Time {
	ts := uint64(binary.BigEndian.Uint32(u[0:4])) |
		uint64(binary.BigEndian.Uint16(u[4:6]))<<32 |
		uint64(binary.BigEndian.Uint16(u[6:8])&0x0fff)<<48
	d := int64(ts) - uuidEpochOffset
	return time.Unix(d/1e7, d%1e7*100).UTC()
}
