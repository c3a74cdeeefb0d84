package reliability

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/sidecar"
	"github.com/tracecar/tracecar/tracing"
)

// TestNodeKilledMidLoad kills the node three times under write load. The node is stopped
// as a killed process is (listener and every connection closed at once) and restarted on
// the same address with its data kept (the same in-memory engine, as a process restarted on
// its disk). Every request in flight gets an error before the client's deadline, the
// sidecar stays up, load recovers after each restart, and every write a client saw
// acknowledged is readable at the end.
func TestNodeKilledMidLoad(t *testing.T) {
	const writers, kills = 8, 3
	n := startNode(t, node.Config{})
	tr := tracing.New(tracing.Options{})
	t.Cleanup(func() { tr.Close(t.Context()) })
	sc := startSidecar(t, sidecar.Config{NodeAddr: n.addr}, tr)
	s := session(t, sc.addr)
	mustExec(t, s, "CREATE KEYSPACE IF NOT EXISTS rel WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
	mustExec(t, s, "CREATE TABLE IF NOT EXISTS rel.acked (k int PRIMARY KEY, v int)")

	// Each request runs under a deadline longer than the driver's own timeout: a request
	// that neither succeeds nor fails by then was left hanging.
	const clientDeadline = 25 * time.Second
	var (
		mu       sync.Mutex
		acked    []int
		ok, fail atomic.Int64
		hung     atomic.Int64
		timedOut atomic.Int64
		firstErr atomic.Pointer[error]
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := w*1_000_000 + i
				ctx, cancel := context.WithTimeout(context.Background(), clientDeadline)
				err := s.Query("INSERT INTO rel.acked (k, v) VALUES (?, ?)", k, k).WithContext(ctx).Exec()
				cancel()
				switch {
				case err == nil:
					ok.Add(1)
					mu.Lock()
					acked = append(acked, k)
					mu.Unlock()
				case errors.Is(err, context.DeadlineExceeded):
					hung.Add(1)
				case errors.Is(err, gocql.ErrTimeoutNoResponse):
					timedOut.Add(1)
				default:
					fail.Add(1)
					firstErr.CompareAndSwap(nil, &err)
					time.Sleep(5 * time.Millisecond) // as a driver's retry policy would
				}
			}
		}()
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(testTimeout); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v", what, testTimeout)
			}
		}
	}
	var recoveries []int64
	for kill := range kills {
		before := ok.Load()
		waitFor("load before kill", func() bool { return ok.Load() >= before+200 })
		n.stop()
		time.Sleep(300 * time.Millisecond) // the node stays down for a while
		n.start(t)
		after := ok.Load()
		waitFor("load recovering after restart", func() bool { return ok.Load() >= after+200 })
		recoveries = append(recoveries, ok.Load()-after)
		t.Logf("kill %d: %d writes acknowledged so far, %d failed", kill+1, ok.Load(), fail.Load())
	}
	close(stop)
	wg.Wait()

	st := sc.Stats()
	var e error
	if p := firstErr.Load(); p != nil {
		e = *p
	}
	t.Logf("FIGURE node killed mid-load: %d kills, %d writes acknowledged, %d failed with an error (first: %v), %d driver timeouts, %d left hanging past the %v deadline; sidecar NodeFailures=%d, Accepted=%d",
		kills, ok.Load(), fail.Load(), e, timedOut.Load(), hung.Load(), clientDeadline, st.NodeFailures, st.Accepted)
	if hung.Load() != 0 || timedOut.Load() != 0 {
		t.Errorf("%d requests hung past the client deadline and %d timed out in the driver: every request in flight must get an error", hung.Load(), timedOut.Load())
	}
	if st.NodeFailures == 0 {
		t.Errorf("sidecar counted no node failure across %d kills", kills)
	}
	// The sidecar is still the same process, serving; every acknowledged write is there.
	check := session(t, sc.addr)
	missing := 0
	for _, k := range acked {
		var v int
		if err := check.Query("SELECT v FROM rel.acked WHERE k = ?", k).Scan(&v); err != nil || v != k {
			missing++
			if missing <= 3 {
				t.Errorf("acknowledged write k=%d: got %d, %v", k, v, err)
			}
		}
	}
	t.Logf("FIGURE acknowledged writes read back: %d of %d", len(acked)-missing, len(acked))
}
