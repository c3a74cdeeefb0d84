package admin

import (
	"testing"
	"time"
)

// TestHTTPServerTimers checks the settings of the admin server that decide how often its
// library wakes the process with no request coming: no Date header (a goroutine a second,
// TestServerStartsNoClockGoroutine watches it) and the worker pool's check for idle workers
// at most every minute (every 10 s by default). The check's goroutine sleeps in between, so
// what it costs shows only in its period.
func TestHTTPServerTimers(t *testing.T) {
	srv := New(Config{}).httpServer()
	if !srv.NoDefaultDate {
		t.Error("NoDefaultDate is false: fasthttp's Date goroutine wakes the process every second")
	}
	if srv.MaxIdleWorkerDuration < time.Minute {
		t.Errorf("MaxIdleWorkerDuration %v: its goroutine wakes the process that often; want a minute or more", srv.MaxIdleWorkerDuration)
	}
}
