package node_test

import (
	"testing"

	"github.com/gocql/gocql"

	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/internal/testkit/drivertest"
)

// TestLexicalUUIDGocql is gocql's own TestLexicalUUIDType: a clustering column of the custom
// type LexicalUUIDType, bound and scanned as a gocql.UUID (gocql maps the class to uuid).
func TestLexicalUUIDGocql(t *testing.T) {
	_, ap := mustServe(t, node.Config{})
	s, err := drivertest.Cluster(options(ap, "none")).CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, q := range []string{
		"CREATE KEYSPACE lx WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
		"CREATE TABLE lx.t (key varchar, column1 'org.apache.cassandra.db.marshal.LexicalUUIDType', value int, PRIMARY KEY (key, column1))",
	} {
		if err := s.Query(q).Exec(); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	key, col := gocql.TimeUUID().String(), gocql.TimeUUID()
	if err := s.Query("INSERT INTO lx.t (key, column1, value) VALUES (?, ?, ?)", key, col, 55).Exec(); err != nil {
		t.Fatal(err)
	}
	var got gocql.UUID
	var v int
	if err := s.Query("SELECT column1, value FROM lx.t WHERE key = ? AND column1 = ?", key, col).Scan(&got, &v); err != nil {
		t.Fatal(err)
	}
	if got != col || v != 55 {
		t.Errorf("got %v %d; want %v 55", got, v, col)
	}
}
