package drivertest

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/tracecar/tracecar/internal/cql"
)

// Compressor returns the gocql compressor for name: none (nil), lz4 or snappy.
func Compressor(name string) gocql.Compressor {
	switch name {
	case "lz4":
		return cql.LZ4{}
	case "snappy":
		return &gocql.SnappyCompressor{}
	}
	return nil
}

// Cluster returns a gocql cluster config with the driver's defaults (host lookup on) for
// the target in o.
func Cluster(o Options) *gocql.ClusterConfig {
	c := gocql.NewCluster(o.Host)
	c.Port = o.Port
	c.Timeout = 10 * time.Second
	c.ConnectTimeout = 10 * time.Second
	c.Compressor = Compressor(o.Compression)
	if o.User != "" {
		c.Authenticator = gocql.PasswordAuthenticator{Username: o.User, Password: o.Pass}
	}
	if o.TLSCA != "" {
		c.SslOpts = &gocql.SslOptions{
			Config:   &tls.Config{ServerName: o.Host, MinVersion: tls.VersionTLS12},
			CaPath:   o.TLSCA,
			CertPath: o.TLSCert, KeyPath: o.TLSKey,
			EnableHostVerification: true,
		}
	}
	return c
}

// RunGocql runs the gocql suite: schema, prepared statements, paging through 10,000 rows,
// a batch, a TTL that expires, and a trace read through gocql's Tracer.
func RunGocql(tb testing.TB, o Options) {
	tb.Helper()
	s, err := Cluster(o).CreateSession()
	if err != nil {
		tb.Fatalf("gocql connect to %s:%d (%s): %v", o.Host, o.Port, orDefault(o.Compression, "none"), err)
	}
	defer s.Close()
	g := gocqlSuite{tb: tb, s: s, ks: orDefault(o.Keyspace, "gocql_suite_"+orDefault(o.Compression, "none"))}
	g.must("DROP KEYSPACE IF EXISTS " + g.ks)
	g.must("CREATE KEYSPACE " + g.ks + " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
	g.must("CREATE TABLE " + g.ks + ".kv (k int PRIMARY KEY, v text, b blob, l list<int>, m map<text, int>)")
	g.must("CREATE TABLE " + g.ks + ".rows (p int, c int, v text, PRIMARY KEY (p, c))")
	g.prepared()
	g.paging()
	g.batch()
	g.ttl()
	g.trace()
	// Errors a person can act on.
	if err := s.Query("SELECT * FROM " + g.ks + ".nope").Exec(); err == nil || !strings.Contains(err.Error(), "nope") {
		tb.Fatalf("select from a missing table: got %v; want an error naming it", err)
	}
	g.must("DROP KEYSPACE " + g.ks)
}

// gocqlSuite is one run of RunGocql: its session, and the keyspace of its tables kv and rows.
type gocqlSuite struct {
	tb testing.TB
	s  *gocql.Session
	ks string
}

// must runs stmt with values, and fails the test on an error.
func (g *gocqlSuite) must(stmt string, values ...any) {
	g.tb.Helper()
	if err := g.s.Query(stmt, values...).Exec(); err != nil {
		g.tb.Fatalf("%s: %v", stmt, err)
	}
}

// prepared inserts ten rows of every kind of column of kv and reads one back (gocql
// prepares every statement with values).
func (g *gocqlSuite) prepared() {
	g.tb.Helper()
	for i := 0; i < 10; i++ {
		g.must("INSERT INTO "+g.ks+".kv (k, v, b, l, m) VALUES (?, ?, ?, ?, ?)", i, "v"+strconv.Itoa(i), []byte{byte(i)}, []int{i, i + 1}, map[string]int{"i": i})
	}
	var (
		v string
		b []byte
		l []int
		m map[string]int
	)
	if err := g.s.Query("SELECT v, b, l, m FROM "+g.ks+".kv WHERE k = ?", 7).Scan(&v, &b, &l, &m); err != nil {
		g.tb.Fatalf("select k=7: %v", err)
	}
	if v != "v7" || !bytes.Equal(b, []byte{7}) || fmt.Sprint(l) != "[7 8]" || m["i"] != 7 {
		g.tb.Fatalf("select k=7: got %q %x %v %v; want v7 07 [7 8] map[i:7]", v, b, l, m)
	}
}

// paging writes 10,000 rows in one partition from 8 goroutines, then pages them back in
// clustering order.
func (g *gocqlSuite) paging() {
	g.tb.Helper()
	const total = 10000
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for c := w; c < total; c += 8 {
				if err := g.s.Query("INSERT INTO "+g.ks+".rows (p, c, v) VALUES (?, ?, ?)", 1, c, "x").Exec(); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		g.tb.Fatalf("insert rows: %v", err)
	}
	iter := g.s.Query("SELECT c FROM "+g.ks+".rows WHERE p = ?", 1).PageSize(1000).Iter()
	var c, n int
	for iter.Scan(&c) {
		if c != n {
			g.tb.Fatalf("paging: row %d has c=%d; want %d", n, c, n)
		}
		n++
	}
	if err := iter.Close(); err != nil {
		g.tb.Fatalf("paging: %v", err)
	}
	if n != total {
		g.tb.Fatalf("paging: got %d rows; want %d", n, total)
	}
}

// batch writes three rows in a logged batch and counts them.
func (g *gocqlSuite) batch() {
	g.tb.Helper()
	batch := g.s.NewBatch(gocql.LoggedBatch)
	for i := 0; i < 3; i++ {
		batch.Query("INSERT INTO "+g.ks+".rows (p, c, v) VALUES (?, ?, ?)", 2, i, "b")
	}
	if err := g.s.ExecuteBatch(batch); err != nil {
		g.tb.Fatalf("batch: %v", err)
	}
	var count int
	if err := g.s.Query("SELECT count(*) FROM "+g.ks+".rows WHERE p = ?", 2).Scan(&count); err != nil || count != 3 {
		g.tb.Fatalf("after batch: count %d, err %v; want 3", count, err)
	}
}

// ttl writes a row with a TTL, reads it, and waits for it to expire. Expiry is counted in
// whole seconds, as in Cassandra, so a TTL of 1 can expire before the next read: 2 leaves
// the row visible for at least a second.
func (g *gocqlSuite) ttl() {
	g.tb.Helper()
	var v string
	g.must("INSERT INTO "+g.ks+".kv (k, v) VALUES (?, ?) USING TTL 2", 100, "short-lived")
	if err := g.s.Query("SELECT v FROM "+g.ks+".kv WHERE k = ?", 100).Scan(&v); err != nil {
		g.tb.Fatalf("ttl row before expiry: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := g.s.Query("SELECT v FROM "+g.ks+".kv WHERE k = ?", 100).Scan(&v)
		if err == gocql.ErrNotFound {
			return
		}
		if err != nil {
			g.tb.Fatalf("ttl row: %v", err)
		}
		if time.Now().After(deadline) {
			g.tb.Fatalf("ttl row still there after 10s")
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// trace reads a row with tracing on, and the trace through gocql's Tracer.
func (g *gocqlSuite) trace() {
	g.tb.Helper()
	var v string
	var out bytes.Buffer
	tracer := gocql.NewTraceWriter(g.s, &syncWriter{w: &out})
	if err := g.s.Query("SELECT v FROM "+g.ks+".kv WHERE k = ?", 3).Trace(tracer).Scan(&v); err != nil {
		g.tb.Fatalf("traced select: %v", err)
	}
	if txt := out.String(); !strings.Contains(txt, "Tracing session") || !strings.Contains(txt, "Request complete") {
		g.tb.Fatalf("trace output lacks the session or its events:\n%s", txt)
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
