//go:build linux

package handover

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestControlSocketServes: a control socket hears successors one at a time: one whose
// handoff fails leaves it serving the next, the first that succeeds ends its serving, and
// its file then stays for the successor; a socket stopped instead stops serving, and its
// file goes with it.
func TestControlSocketServes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	path := filepath.Join(t.TempDir(), "ctl.sock")
	ln, err := ListenControl(path)
	if err != nil {
		t.Fatal(err)
	}
	ctl := NewControlSocket()
	if !ctl.Use(ln) {
		t.Fatal("Use refused a socket before Stop")
	}
	handoffs, failures := 0, 0
	served := make(chan bool, 1)
	go func() {
		served <- ctl.Serve(func(s *Successor) error {
			defer s.Close()
			handoffs++
			if handoffs == 1 {
				return errors.New("the first fails")
			}
			return nil
		}, func(*Successor, error) { failures++ })
	}()
	for range 2 {
		pred, err := DialPredecessor(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		pred.Receive(ctx) // ends when the successor's handoff closes its side
		pred.Close()
	}
	if !<-served {
		t.Fatal("Serve returned false after a successful handoff")
	}
	if handoffs != 2 || failures != 1 {
		t.Errorf("%d handoffs, %d failures; want 2 and 1", handoffs, failures)
	}
	select {
	case <-ctl.HandedOver():
	default:
		t.Error("HandedOver not closed after a successful handoff")
	}
	ctl.Close()
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the socket file of a process handed over is gone (%v); it is the successor's", err)
	}

	path2 := filepath.Join(t.TempDir(), "ctl2.sock")
	ln2, err := ListenControl(path2)
	if err != nil {
		t.Fatal(err)
	}
	ctl2 := NewControlSocket()
	ctl2.Use(ln2)
	go func() { served <- ctl2.Serve(func(*Successor) error { return nil }, func(*Successor, error) {}) }()
	ctl2.Stop()
	if <-served {
		t.Error("Serve of a stopped socket returned true")
	}
	if ctl2.Use(ln2) {
		t.Error("Use after Stop returned true")
	}
	ctl2.Close()
	if _, err := os.Stat(path2); !os.IsNotExist(err) {
		t.Errorf("the socket file of a process not handed over stays after Close (%v)", err)
	}
}
