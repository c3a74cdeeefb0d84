package handover

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// DefaultControlPath is the control socket of a sidecar listening on listen (host:port):
// tracecar-HOST-PORT.sock in $XDG_RUNTIME_DIR, else in the temporary folder.
func DefaultControlPath(listen string) string {
	host, port, _ := net.SplitHostPort(listen)
	if host == "" {
		host = "all"
	}
	dir := os.Getenv("XDG_RUNTIME_DIR")
	if dir == "" {
		dir = os.TempDir()
	}
	host = strings.NewReplacer(":", "_", "%", "_", "/", "_").Replace(host)
	return filepath.Join(dir, "tracecar-"+host+"-"+port+".sock")
}

// ControlSocket is the control socket a process serves, once it does, where a successor
// takes it over (ListenControl makes one, or a predecessor hands it over). It is safe for
// concurrent use.
type ControlSocket struct {
	handedOver chan struct{} // closed once a successor took this process over
	stopped    chan struct{} // closed by Stop

	mu sync.Mutex
	ln *net.UnixListener
}

// NewControlSocket returns a control socket that serves nothing yet.
func NewControlSocket() *ControlSocket {
	return &ControlSocket{handedOver: make(chan struct{}), stopped: make(chan struct{})}
}

// Use records ln as the socket served, and reports whether to serve it: not once Stop was
// called.
func (c *ControlSocket) Use(ln *net.UnixListener) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.stopped:
		return false
	default:
	}
	c.ln = ln
	return true
}

// Serve serves the socket: each new process that connects takes this one over, through
// handoff, one at a time. It returns true once one has (HandedOver is then closed), and
// false once Stop was called or the socket failed. A handoff that fails leaves this
// process serving on, and the socket open to the next; failed hears of it.
func (c *ControlSocket) Serve(handoff func(*Successor) error, failed func(*Successor, error)) bool {
	c.mu.Lock()
	ln := c.ln
	c.mu.Unlock()
	if ln == nil {
		return false // Use was not called, or came after Stop
	}
	for {
		succ, err := AcceptSuccessor(ln)
		if err != nil {
			return false // stopped: the process is stopping (or the socket failed: it serves on without)
		}
		if err := handoff(succ); err != nil {
			failed(succ, err)
			continue
		}
		close(c.handedOver)
		return true
	}
}

// HandedOver is closed once a successor took this process over.
func (c *ControlSocket) HandedOver() <-chan struct{} { return c.handedOver }

// Stopped is closed once Stop was called.
func (c *ControlSocket) Stopped() <-chan struct{} { return c.stopped }

// Stop ends the serving of the socket, which stays open (and its file in place) until
// Close.
func (c *ControlSocket) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	close(c.stopped)
	if c.ln != nil {
		c.ln.SetDeadline(time.Unix(1, 0))
	}
}

// Close closes the socket, and removes its file unless a successor took it.
func (c *ControlSocket) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ln == nil {
		return
	}
	select {
	case <-c.handedOver:
		c.ln.SetUnlinkOnClose(false) // the socket file is the successor's
	default:
		c.ln.SetUnlinkOnClose(true)
	}
	c.ln.Close()
}
