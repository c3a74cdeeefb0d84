//go:build !linux

package sidecar

// Without epoll every connection takes the goroutine path.

type loopCmdKind uint8

const (
	cmdDrain loopCmdKind = iota
	cmdClose
)

type loopState struct{}

type loopGroup struct{}

var processLoops loopGroup

func (g *loopGroup) start() error { return nil }

func (c *conn) toLoop(*loopGroup) bool    { return false }
func (c *conn) inLoop() bool              { return false }
func (c *conn) postLoop(kind loopCmdKind) {}

func (c segments) holdLargeOnLoop(size int) (bool, error) { return false, nil }
