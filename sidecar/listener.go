package sidecar

import (
	"errors"
	"net"
	"os"
	"sync"
)

// Listener is a net.Listener that a handover pauses, hands over and, when the handover
// fails, resumes (see handover.go). Pause makes Accept wait and returns a duplicate of the
// listening socket for the successor; Resume accepts again, on a listener made from that
// duplicate; Close ends it, and Accept returns net.ErrClosed. The socket itself stays open
// throughout, so that no connection is refused: while this process is paused, new
// connections wait in its backlog for whichever process accepts first. A Listener is safe
// for concurrent use.
type Listener struct {
	mu     sync.Mutex
	cond   *sync.Cond
	ln     net.Listener // nil while paused
	file   *os.File     // the duplicate, once paused
	addr   net.Addr
	closed bool
}

// NewListener returns a Listener accepting on ln, which must be a *net.TCPListener or a
// *net.UnixListener for Pause to work.
func NewListener(ln net.Listener) *Listener {
	l := &Listener{ln: ln, addr: ln.Addr()}
	l.cond = sync.NewCond(&l.mu)
	return l
}

// Accept waits for the next connection; while the Listener is paused it waits for Resume
// or Close.
func (l *Listener) Accept() (net.Conn, error) {
	l.mu.Lock()
	for {
		if l.closed {
			l.mu.Unlock()
			return nil, net.ErrClosed
		}
		if ln := l.ln; ln != nil {
			l.mu.Unlock()
			c, err := ln.Accept()
			if err == nil {
				return c, nil
			}
			l.mu.Lock()
			if l.ln == ln && !l.closed {
				l.mu.Unlock()
				return nil, err
			}
			continue // paused, resumed or closed meanwhile
		}
		l.cond.Wait()
	}
}

// Pause stops accepting and returns a duplicate of the listening socket, which the
// Listener keeps (and closes with Close); the caller must not close it. Connections
// accepted before Pause returns are the caller's.
func (l *Listener) Pause() (*os.File, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
		return nil, net.ErrClosed
	case l.ln == nil:
		return l.file, nil
	}
	var f *os.File
	var err error
	switch ln := l.ln.(type) {
	case *net.TCPListener:
		f, err = ln.File()
	case *net.UnixListener:
		ln.SetUnlinkOnClose(false) // the socket file stays: the duplicate serves it
		f, err = ln.File()
	default:
		err = errors.New("sidecar: a listener that is neither TCP nor Unix cannot be handed over")
	}
	if err != nil {
		return nil, err
	}
	if l.file != nil {
		l.file.Close()
	}
	l.file = f
	l.ln.Close()
	l.ln = nil
	return f, nil
}

// Resume accepts again after Pause, on the same socket.
func (l *Listener) Resume() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.ln != nil {
		return nil
	}
	ln, err := net.FileListener(l.file)
	if err != nil {
		return err
	}
	l.ln = ln
	l.cond.Broadcast()
	return nil
}

// Close stops accepting for good and closes this process's descriptors of the socket;
// after a handover the socket lives on in the successor.
func (l *Listener) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	var err error
	if l.ln != nil {
		err = l.ln.Close()
	}
	if l.file != nil {
		l.file.Close()
	}
	l.cond.Broadcast()
	return err
}

// Addr returns the listener's address.
func (l *Listener) Addr() net.Addr { return l.addr }
