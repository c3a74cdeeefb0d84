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
	ks := orDefault(o.Keyspace, "gocql_suite_"+orDefault(o.Compression, "none"))
	must := func(stmt string, values ...any) {
		tb.Helper()
		if err := s.Query(stmt, values...).Exec(); err != nil {
			tb.Fatalf("%s: %v", stmt, err)
		}
	}
	must("DROP KEYSPACE IF EXISTS " + ks)
	must("CREATE KEYSPACE " + ks + " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
	must("CREATE TABLE " + ks + ".kv (k int PRIMARY KEY, v text, b blob, l list<int>, m map<text, int>)")
	must("CREATE TABLE " + ks + ".rows (p int, c int, v text, PRIMARY KEY (p, c))")

	// Prepared insert and select (gocql prepares every statement with values).
	for i := 0; i < 10; i++ {
		must("INSERT INTO "+ks+".kv (k, v, b, l, m) VALUES (?, ?, ?, ?, ?)", i, "v"+strconv.Itoa(i), []byte{byte(i)}, []int{i, i + 1}, map[string]int{"i": i})
	}
	var (
		v string
		b []byte
		l []int
		m map[string]int
	)
	if err := s.Query("SELECT v, b, l, m FROM "+ks+".kv WHERE k = ?", 7).Scan(&v, &b, &l, &m); err != nil {
		tb.Fatalf("select k=7: %v", err)
	}
	if v != "v7" || !bytes.Equal(b, []byte{7}) || fmt.Sprint(l) != "[7 8]" || m["i"] != 7 {
		tb.Fatalf("select k=7: got %q %x %v %v; want v7 07 [7 8] map[i:7]", v, b, l, m)
	}

	// 10,000 rows in one partition, then paged back in clustering order.
	const total = 10000
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for c := w; c < total; c += 8 {
				if err := s.Query("INSERT INTO "+ks+".rows (p, c, v) VALUES (?, ?, ?)", 1, c, "x").Exec(); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		tb.Fatalf("insert rows: %v", err)
	}
	iter := s.Query("SELECT c FROM "+ks+".rows WHERE p = ?", 1).PageSize(1000).Iter()
	var c, n int
	for iter.Scan(&c) {
		if c != n {
			tb.Fatalf("paging: row %d has c=%d; want %d", n, c, n)
		}
		n++
	}
	if err := iter.Close(); err != nil {
		tb.Fatalf("paging: %v", err)
	}
	if n != total {
		tb.Fatalf("paging: got %d rows; want %d", n, total)
	}

	// A batch.
	batch := s.NewBatch(gocql.LoggedBatch)
	for i := 0; i < 3; i++ {
		batch.Query("INSERT INTO "+ks+".rows (p, c, v) VALUES (?, ?, ?)", 2, i, "b")
	}
	if err := s.ExecuteBatch(batch); err != nil {
		tb.Fatalf("batch: %v", err)
	}
	var count int
	if err := s.Query("SELECT count(*) FROM "+ks+".rows WHERE p = ?", 2).Scan(&count); err != nil || count != 3 {
		tb.Fatalf("after batch: count %d, err %v; want 3", count, err)
	}

	// A TTL that expires. Expiry is counted in whole seconds, as in Cassandra, so a TTL of 1
	// can expire before the next read: 2 leaves the row visible for at least a second.
	must("INSERT INTO "+ks+".kv (k, v) VALUES (?, ?) USING TTL 2", 100, "short-lived")
	if err := s.Query("SELECT v FROM "+ks+".kv WHERE k = ?", 100).Scan(&v); err != nil {
		tb.Fatalf("ttl row before expiry: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := s.Query("SELECT v FROM "+ks+".kv WHERE k = ?", 100).Scan(&v)
		if err == gocql.ErrNotFound {
			break
		}
		if err != nil {
			tb.Fatalf("ttl row: %v", err)
		}
		if time.Now().After(deadline) {
			tb.Fatalf("ttl row still there after 10s")
		}
		time.Sleep(250 * time.Millisecond)
	}

	// A trace through gocql's Tracer.
	var out bytes.Buffer
	tracer := gocql.NewTraceWriter(s, &syncWriter{w: &out})
	if err := s.Query("SELECT v FROM "+ks+".kv WHERE k = ?", 3).Trace(tracer).Scan(&v); err != nil {
		tb.Fatalf("traced select: %v", err)
	}
	if txt := out.String(); !strings.Contains(txt, "Tracing session") || !strings.Contains(txt, "Request complete") {
		tb.Fatalf("trace output lacks the session or its events:\n%s", txt)
	}

	// Errors a person can act on.
	if err := s.Query("SELECT * FROM " + ks + ".nope").Exec(); err == nil || !strings.Contains(err.Error(), "nope") {
		tb.Fatalf("select from a missing table: got %v; want an error naming it", err)
	}
	must("DROP KEYSPACE " + ks)
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
