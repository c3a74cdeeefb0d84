// Package idlepark parks the idle connections of the goroutine path: one parker per
// process watches the sockets of parked sides in an epoll set of its own, and looks at the
// connections every Idle for sides to park (package sidecar's park.go says how a connection
// parks). Without epoll nothing parks.
package idlepark

import "time"

// Parkable is a connection that parks, as the parker sees it. Package sidecar provides it.
type Parkable interface {
	// Unpark starts side s again, whose parking tok the parker found its socket ready.
	Unpark(s int, tok uint64)
	// AskPark is the parker's look at the connection, every Idle.
	AskPark()
}

// DefaultIdle is how long a connection has nothing to do before its sides park: between
// one and two of these after its last frame. Parker.SetIdle changes it.
const DefaultIdle = time.Second
