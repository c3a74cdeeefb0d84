package handover

import (
	"sync/atomic"
	"time"
)

// Parkable is a connection that parks, as the parker sees it. Package sidecar provides it.
type Parkable interface {
	// Unpark starts side s again, whose parking tok the parker found its socket ready.
	Unpark(s int, tok uint64)
	// AskPark is the parker's look at the connection, every ParkIdle.
	AskPark()
}

// ParkIdle is how long a connection has nothing to do before its sides park: between one
// and two of these after its last frame, in nanoseconds. A variable for tests.
var ParkIdle atomic.Int64

func init() { ParkIdle.Store(int64(time.Second)) }
