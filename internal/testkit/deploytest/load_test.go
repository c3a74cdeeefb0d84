package deploytest_test

import (
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocql/gocql"
)

// startLoad runs a gocql workload through the sidecars, about 200 operations a second
// spread over them by the driver (prepared INSERTs and SELECTs, a tenth of the SELECTs at
// consistency ALL, an anti-pattern), until the returned stop is called. Errors are ignored:
// the test stops a node under it.
func startLoad(tb testing.TB, sidecars []string) (stop func()) {
	tb.Helper()
	host, port, _ := net.SplitHostPort(sidecars[0])
	var hosts []string
	for _, s := range sidecars {
		h, _, _ := net.SplitHostPort(s)
		hosts = append(hosts, h)
	}
	c := gocql.NewCluster(hosts...)
	c.Port, _ = strconv.Atoi(port)
	c.Timeout = 5 * time.Second
	c.ConnectTimeout = 10 * time.Second
	c.Consistency = gocql.One
	s, err := c.CreateSession()
	if err != nil {
		tb.Fatalf("gocql through %s: %v", host, err)
	}
	for _, q := range []string{
		"CREATE KEYSPACE IF NOT EXISTS deploy WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
		"CREATE TABLE IF NOT EXISTS deploy.kv (k int PRIMARY KEY, v text)",
	} {
		if err := s.Query(q).Exec(); err != nil {
			s.Close()
			tb.Fatalf("%s: %v", q, err)
		}
	}
	var done atomic.Bool
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; !done.Load(); i++ {
				k := w*1_000_000 + i
				s.Query("INSERT INTO deploy.kv (k, v) VALUES (?, ?)", k, "v").Exec()
				var v string
				s.Query("SELECT v FROM deploy.kv WHERE k = ?", k).Scan(&v)
				if i%10 == 0 { // consistency ALL: an anti-pattern, for its panel
					s.Query("SELECT v FROM deploy.kv WHERE k = ?", k).Consistency(gocql.All).Scan(&v)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			done.Store(true)
			wg.Wait()
			s.Close()
		})
	}
	tb.Cleanup(stop)
	return stop
}
