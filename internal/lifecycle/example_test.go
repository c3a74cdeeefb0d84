package lifecycle_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/tracecar/tracecar/internal/lifecycle"
)

// A server runs until it is interrupted; a worker fails. The group stops the server when
// the worker returns, and reports the worker's error.
func Example() {
	var g lifecycle.Group
	ctx, cancel := context.WithCancel(context.Background())
	g.Add(func() error {
		<-ctx.Done()
		fmt.Println("server: stopped")
		return nil
	}, func(error) {
		cancel()
	})
	g.Add(func() error {
		return errors.New("worker: disk full")
	}, func(error) {})
	fmt.Println("group:", g.Run())
	// Output:
	// server: stopped
	// group: worker: disk full
}
