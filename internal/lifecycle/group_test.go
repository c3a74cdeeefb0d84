package lifecycle

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// step is what a test actor does: return err once it is interrupted, or at once.
type step struct {
	err          error
	untilStopped bool // wait for the interrupt, else return at once
}

func TestGroup(t *testing.T) {
	errA, errB := errors.New("a"), errors.New("b")
	tests := []struct {
		name  string
		steps []step
		want  error
	}{
		{name: "no actors", want: nil},
		{name: "one actor returns nil", steps: []step{{}}, want: nil},
		{name: "one actor fails", steps: []step{{err: errA}}, want: errA},
		{name: "an actor that returns nil stops the others",
			steps: []step{{untilStopped: true}, {}, {untilStopped: true}}, want: nil},
		{name: "the first error is reported, and the others interrupted",
			steps: []step{{untilStopped: true}, {err: errA}, {untilStopped: true}}, want: errA},
		{name: "an error met while stopping is reported after a nil first",
			steps: []step{{}, {untilStopped: true, err: errB}}, want: errB},
		{name: "of two errors, the first returned wins",
			steps: []step{{untilStopped: true, err: errB}, {err: errA}}, want: errA},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var g Group
			var interrupted, returned atomic.Int32
			for _, s := range tt.steps {
				stop := make(chan struct{})
				g.Add(func() error {
					defer returned.Add(1)
					if s.untilStopped {
						<-stop
					}
					return s.err
				}, func(error) {
					interrupted.Add(1)
					close(stop)
				})
			}
			done := make(chan error, 1)
			go func() { done <- g.Run() }()
			select {
			case err := <-done:
				if err != tt.want {
					t.Errorf("Run() = %v; want %v", err, tt.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return: an actor was not interrupted")
			}
			if n := int(interrupted.Load()); n != len(tt.steps) {
				t.Errorf("%d actors interrupted; want all %d", n, len(tt.steps))
			}
			if n := int(returned.Load()); n != len(tt.steps) {
				t.Errorf("%d actors returned before Run did; want all %d", n, len(tt.steps))
			}
		})
	}
}
