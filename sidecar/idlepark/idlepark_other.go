//go:build !linux

package idlepark

import (
	"syscall"
	"time"
)

// Without epoll nothing parks.

// Parker is the process's parker; without epoll there is none.
type Parker struct{}

// Process returns nil: nothing parks.
func Process() *Parker { return nil }

// SetIdle does nothing.
func (pk *Parker) SetIdle(d time.Duration) time.Duration { return DefaultIdle }

// Add does nothing.
func (pk *Parker) Add(Parkable) {}

// Remove does nothing.
func (pk *Parker) Remove(Parkable) {}

// Watch reports false: nothing parks.
func (pk *Parker) Watch(Parkable, int, syscall.RawConn) (uint64, bool) { return 0, false }

// Unwatch does nothing.
func (pk *Parker) Unwatch(uint64, syscall.RawConn) {}
