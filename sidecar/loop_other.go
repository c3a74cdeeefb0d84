//go:build !linux

package sidecar

// Without epoll every connection takes the goroutine path.

type loopGroup struct{}

var processLoops loopGroup

func (g *loopGroup) start() error { return nil }

func (c *conn) toLoop(*loopGroup) bool { return false }
func (c *conn) inLoop() bool           { return false }

// LoopFailures returns 0: there are no event loops.
func LoopFailures() uint64 { return 0 }
