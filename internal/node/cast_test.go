package node_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gocql/gocql"

	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/internal/testkit/drivertest"
)

// castQuery casts to every type a cast can name, so that the result metadata of each is
// checked: the values themselves are checked by testdata/statements/casts.json.
const castQuery = "SELECT CAST(f AS tinyint), CAST(f AS smallint), CAST(k AS bigint), CAST(k AS float), CAST(f AS double), " +
	"CAST(f AS decimal), CAST(f AS varint), CAST(k AS ascii), CAST(f AS text), CAST(id AS timestamp), CAST(ts AS date), " +
	"CAST(ip AS text), CAST(CAST(f AS int) AS text), avg(CAST(k AS double)) FROM t"

// TestCastResultTypes checks that CAST(… AS type) gives the drivers a column of that type,
// named as 4.1 names it, and a value they decode as one: gocql and the Python driver,
// directly and through a sidecar.
func TestCastResultTypes(t *testing.T) {
	names := []string{"cast(f as tinyint)", "cast(f as smallint)", "cast(k as bigint)", "cast(k as float)", "cast(f as double)",
		"cast(f as decimal)", "cast(f as varint)", "cast(k as ascii)", "cast(f as text)", "cast(id as timestamp)", "cast(ts as date)",
		"cast(ip as text)", "cast(cast(f as int) as text)", "system.avg(cast(k as double))"}
	goTypes := []gocql.Type{gocql.TypeTinyInt, gocql.TypeSmallInt, gocql.TypeBigInt, gocql.TypeFloat, gocql.TypeDouble,
		gocql.TypeDecimal, gocql.TypeVarint, gocql.TypeAscii, gocql.TypeVarchar, gocql.TypeTimestamp, gocql.TypeDate,
		gocql.TypeVarchar, gocql.TypeVarchar, gocql.TypeDouble}
	const wantPython = `cast(f as tinyint)|tinyint|5
cast(f as smallint)|smallint|5
cast(k as bigint)|bigint|1
cast(k as float)|float|1.0
cast(f as double)|double|5.5
cast(f as decimal)|decimal|Decimal('5.5')
cast(f as varint)|varint|5
cast(k as ascii)|ascii|'1'
cast(f as text)|varchar|'5.5'
cast(id as timestamp)|timestamp|datetime.datetime(2015, 5, 21, 11, 3, 2)
cast(ts as date)|date|Date(16576)
cast(ip as text)|varchar|'0:0:0:0:0:0:0:1'
cast(cast(f as int) as text)|varchar|'5'
system.avg(cast(k as double))|double|1.0
`
	for _, via := range []string{"direct", "sidecar"} {
		t.Run(via, func(t *testing.T) {
			_, ap := mustServe(t, node.Config{})
			if via == "sidecar" {
				ap = mustSidecar(t, ap)
			}
			o := options(ap, "none")
			o.Keyspace = "cast_types"
			c := drivertest.Cluster(o)
			c.Keyspace = ""
			s, err := c.CreateSession()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for _, q := range []string{
				"CREATE KEYSPACE cast_types WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
				"CREATE TABLE cast_types.t (k int PRIMARY KEY, f float, ts timestamp, id timeuuid, ip inet)",
				"INSERT INTO cast_types.t (k, f, ts, id, ip) VALUES (1, 5.5, '2015-05-21 11:03:02+0000', maxTimeuuid('2015-05-21 11:03:02+0000'), '::1')",
			} {
				if err := s.Query(q).Exec(); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			iter := s.Query(strings.Replace(castQuery, "FROM t", "FROM cast_types.t", 1)).Iter()
			row, err := iter.SliceMap()
			if err != nil {
				t.Fatal(err)
			}
			cols := iter.Columns()
			if len(cols) != len(names) || len(row) != 1 {
				t.Fatalf("got %d columns, %d rows; want %d, 1", len(cols), len(row), len(names))
			}
			var got []string
			for i, c := range cols {
				if c.Name != names[i] || c.TypeInfo.Type() != goTypes[i] {
					t.Errorf("column %d: got %s %s; want %s %s", i, c.Name, c.TypeInfo.Type(), names[i], goTypes[i])
				}
				got = append(got, fmt.Sprint(row[0][c.Name]))
			}
			const wantGo = "5 5 1 1 5.5 5.5 5 1 5.5 2015-05-21 11:03:02 +0000 UTC 2015-05-21 00:00:00 +0000 UTC 0:0:0:0:0:0:0:1 5 1"
			if g := strings.Join(got, " "); g != wantGo {
				t.Errorf("gocql values:\n got  %s\n want %s", g, wantGo)
			}
			py := drivertest.PythonColumnTypes(t, o, castQuery)
			if py != wantPython {
				t.Errorf("Python driver, name|type|value:\n got\n%s want\n%s", py, wantPython)
			}
		})
	}
}
