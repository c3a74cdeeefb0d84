package statements

import (
	"sync"
	"sync/atomic"
	"time"
)

// The trace floor's setting, and its state: what Stats holds of it (floor) and what each
// Entry does (floorState). How the floor arms statements is floor.go's.

// DefaultFloorMaxPerSecond is the default of FloorConfig.MaxPerSecond.
const DefaultFloorMaxPerSecond = 10

// FloorConfig is the trace floor's setting. The zero value is off.
type FloorConfig struct {
	// Interval is how often each statement gets a full trace; 0 turns the floor off.
	Interval time.Duration
	// MaxPerSecond bounds the floor's traces a second over all statements; 0 means
	// DefaultFloorMaxPerSecond.
	MaxPerSecond int
}

// On reports whether c turns the floor on.
func (c FloorConfig) On() bool { return c.Interval > 0 }

// floorState is an entry's part of the floor, updated with atomic operations.
type floorState struct {
	armed   atomic.Bool
	tried   atomic.Int64 // monotonic: when it was last armed and traced, or armed and missed
	traceID atomic.Pointer[string]
	traceAt atomic.Int64 // wall clock, Unix nanoseconds, of the last floor trace's start
}

// floor runs the arming while the floor is on.
type floor struct {
	on   atomic.Bool
	mu   sync.Mutex // guards cfg, stop and the arming
	cfg  FloorConfig
	stop chan struct{}
	done chan struct{}
}
