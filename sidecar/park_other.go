//go:build !linux

package sidecar

import "syscall"

// Without epoll nothing parks (park.go).

type parker struct{}

func theParker() *parker { return nil }

func (pk *parker) add(*conn)    {}
func (pk *parker) remove(*conn) {}

func (pk *parker) watch(*conn, int, syscall.RawConn) (uint64, bool) { return 0, false }
func (pk *parker) unwatch(uint64, syscall.RawConn)                  {}
