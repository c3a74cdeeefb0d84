//go:build !linux

package handover

import "syscall"

// Without epoll nothing parks.

// Parker is the process's parker; without epoll there is none.
type Parker struct{}

// ProcessParker returns nil: nothing parks.
func ProcessParker() *Parker { return nil }

// Add does nothing.
func (pk *Parker) Add(Parkable) {}

// Remove does nothing.
func (pk *Parker) Remove(Parkable) {}

// Watch reports false: nothing parks.
func (pk *Parker) Watch(Parkable, int, syscall.RawConn) (uint64, bool) { return 0, false }

// Unwatch does nothing.
func (pk *Parker) Unwatch(uint64, syscall.RawConn) {}
