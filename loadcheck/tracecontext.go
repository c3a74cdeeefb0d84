package loadcheck

import (
	"encoding/hex"
	"math/rand/v2"
)

// The values of Config.TraceContext and of a mode's trace-context= step.
const (
	TraceContextNone      = "none"
	TraceContextSampled   = "sampled"
	TraceContextUnsampled = "unsampled"
)

func validTraceContext(s string) bool {
	return s == TraceContextNone || s == TraceContextSampled || s == TraceContextUnsampled
}

// newTraceparent returns a version 00 traceparent buffer with the flags of kind, its ids
// to be filled by fillTraceparent, or nil for none.
func newTraceparent(kind string) []byte {
	var flags string
	switch kind {
	case TraceContextSampled:
		flags = "01"
	case TraceContextUnsampled:
		flags = "00"
	default:
		return nil
	}
	tp := []byte("00-00000000000000000000000000000000-0000000000000000-" + flags)
	return tp
}

// fillTraceparent writes a fresh random trace id and parent id into tp in place, as an
// application would send with each new span, without allocating.
func fillTraceparent(rng *rand.Rand, tp []byte) {
	var ids [24]byte
	for i := 0; i < len(ids); i += 8 {
		v := rng.Uint64() | 1 // never all zeros
		for j := range 8 {
			ids[i+j] = byte(v >> (8 * j))
		}
	}
	hex.Encode(tp[3:35], ids[:16])
	hex.Encode(tp[36:52], ids[16:])
}
