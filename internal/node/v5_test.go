package node_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/internal/testkit/drivertest"
	"github.com/tracecar/tracecar/internal/testkit/rawcql"
)

func TestV5Handshake(t *testing.T) {
	_, ap := mustServe(t, node.Config{})
	for _, comp := range []string{"", "lz4"} {
		t.Run("compression "+comp, func(t *testing.T) {
			c := rawcql.Dial(t, ap.String(), cql.V5, comp)
			// OPTIONS after STARTUP goes in segments, as everything does now.
			sup := c.MustResult(t, cql.Options{}).(cql.Supported)
			if got := sup.Options["PROTOCOL_VERSIONS"]; !slices.Equal(got, []string{"3/v3", "4/v4", "5/v5"}) {
				t.Errorf("PROTOCOL_VERSIONS %v; want 3/v3, 4/v4, 5/v5 as Cassandra 4.1 (v5 out of beta)", got)
			}
			rows := c.Query(t, "SELECT release_version FROM system.local").(cql.RowsResult)
			if len(rows.Rows) != 1 || string(rows.Rows[0][0]) != "4.1.0" {
				t.Errorf("system.local: %v", rows.Rows)
			}
			c.Query(t, "CREATE KEYSPACE IF NOT EXISTS v5ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
			c.Query(t, "CREATE TABLE IF NOT EXISTS v5ks.big (k int PRIMARY KEY, v blob)")
			// A frame of 300 kB goes over three segments each way.
			big := bytes.Repeat([]byte("0123456789abcdef"), 300000/16)
			c.MustResult(t, cql.Query{Query: "INSERT INTO v5ks.big (k, v) VALUES (1, ?)", Params: cql.QueryParams{
				Consistency: cql.One, Flags: cql.QueryValues, Values: []cql.Value{{Bytes: big}}}})
			rows = c.Query(t, "SELECT v FROM v5ks.big WHERE k = 1").(cql.RowsResult)
			if len(rows.Rows) != 1 || !bytes.Equal(rows.Rows[0][0], big) {
				t.Errorf("the large value did not come back whole")
			}
		})
	}
}

func TestV5Refused(t *testing.T) {
	tests := []struct {
		name     string
		max      byte
		version  byte
		wantMsg  string
		versions []string // PROTOCOL_VERSIONS at the highest version it speaks
	}{
		{"v6", 0, 6, "Invalid or unsupported protocol version (6); the lowest supported version is 3 and the greatest is 5", []string{"3/v3", "4/v4", "5/v5"}},
		{"v5 with max 4", 4, 5, "Invalid or unsupported protocol version (5); the lowest supported version is 3 and the greatest is 4", []string{"3/v3", "4/v4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ap := mustServe(t, node.Config{MaxProtocolVersion: tt.max})
			c := rawcql.DialOnly(t, ap.String(), tt.version)
			h, body, err := c.Do(cql.Options{})
			if err != nil {
				t.Fatal(err)
			}
			e, _ := cql.DecodeError(body)
			if h.Version != cql.ResponseBit|cql.V4 || e.Code != cql.ErrCodeProtocol || e.Message != tt.wantMsg {
				t.Errorf("got version %#x, error %#x %q; want 0x84, ProtocolError %q", h.Version, e.Code, e.Message, tt.wantMsg)
			}
			top := rawcql.DialOnly(t, ap.String(), tt.version-1)
			sup := top.MustResult(t, cql.Options{}).(cql.Supported)
			if got := sup.Options["PROTOCOL_VERSIONS"]; !slices.Equal(got, tt.versions) {
				t.Errorf("PROTOCOL_VERSIONS %v; want %v", got, tt.versions)
			}
		})
	}
	t.Run("snappy", func(t *testing.T) {
		_, ap := mustServe(t, node.Config{})
		c := rawcql.DialOnly(t, ap.String(), cql.V5)
		_, err := c.Result(cql.Startup{Options: map[string]string{"CQL_VERSION": "3.0.0", "COMPRESSION": "snappy"}})
		var e cql.Error
		if !errors.As(err, &e) || e.Code != cql.ErrCodeProtocol || !strings.Contains(e.Message, "snappy") {
			t.Errorf("STARTUP v5 with snappy: %v; want a ProtocolError naming snappy (v5 compresses segments with lz4 only)", err)
		}
	})
}

// prepareStar prepares SELECT * FROM v5meta.t on c and returns the Prepared result.
func prepareStar(t *testing.T, c *rawcql.Conn) cql.PreparedResult {
	t.Helper()
	return c.MustResult(t, cql.Prepare{Query: "SELECT * FROM v5meta.t WHERE k = 1"}).(cql.PreparedResult)
}

// TestV5ResultMetadataID is CASSANDRA-10786 on the raw protocol, with two clients of one
// prepared SELECT *. Its table's columns change (ALTER TABLE … ADD); as in Cassandra the
// change evicts the statement, so the first client's next EXECUTE gets Unprepared and it
// prepares again, which registers the statement, under the same id, with the new columns.
// The second client still holds the old metadata: its v5 EXECUTE names the old result
// metadata id and gets the rows with the new metadata and its id, even when it skips the
// metadata. Under v4 the same EXECUTE gets rows of three cells without metadata, which a
// client holding the two-column metadata misreads.
func TestV5ResultMetadataID(t *testing.T) {
	_, ap := mustServe(t, node.Config{})
	first := rawcql.Dial(t, ap.String(), cql.V5, "")
	c := rawcql.Dial(t, ap.String(), cql.V5, "")
	old := rawcql.Dial(t, ap.String(), cql.V4, "")
	c.Query(t, "CREATE KEYSPACE v5meta WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
	c.Query(t, "CREATE TABLE v5meta.t (k int PRIMARY KEY, v int)")
	c.Query(t, "INSERT INTO v5meta.t (k, v) VALUES (1, 2)")
	pr := prepareStar(t, c)
	pr4 := prepareStar(t, old)
	if len(pr.ResultMetadataID) == 0 || len(pr.ResultMetadata.Columns) != 2 {
		t.Fatalf("Prepared: result metadata id %x, %d columns; want an id and 2 columns", pr.ResultMetadataID, len(pr.ResultMetadata.Columns))
	}
	exec := func(c *rawcql.Conn, id []byte) (cql.Message, error) {
		return c.Result(cql.Execute{ID: pr.ID, ResultMetadataID: id, Params: cql.QueryParams{
			Consistency: cql.One, Flags: cql.QuerySkipMetadata}})
	}
	if m, err := exec(c, pr.ResultMetadataID); err != nil || m.(cql.RowsResult).Metadata.Flags&cql.RowsNoMetadata == 0 || m.(cql.RowsResult).Metadata.Flags&cql.RowsMetadataChanged != 0 {
		t.Errorf("EXECUTE with the current id: %+v, %v; want rows with No_metadata, as asked", m, err)
	}
	c.Query(t, "ALTER TABLE v5meta.t ADD c int")
	c.Query(t, "INSERT INTO v5meta.t (k, v, c) VALUES (1, 2, 3)")
	var e cql.Error
	if _, err := exec(first, pr.ResultMetadataID); !errors.As(err, &e) || e.Code != cql.ErrCodeUnprepared {
		t.Fatalf("the first EXECUTE after ALTER TABLE: %v; want Unprepared (the change evicts the statement)", err)
	}
	if re := prepareStar(t, first); bytes.Equal(re.ResultMetadataID, pr.ResultMetadataID) || !bytes.Equal(re.ID, pr.ID) {
		t.Fatalf("prepared again: id %x, result metadata id %x; want the same id %x and a new result metadata id", re.ID, re.ResultMetadataID, pr.ID)
	}

	m, err := exec(c, pr.ResultMetadataID)
	if err != nil {
		t.Fatalf("EXECUTE with the old result metadata id: %v", err)
	}
	r := m.(cql.RowsResult)
	cAt := slices.IndexFunc(r.Metadata.Columns, func(c cql.ColumnSpec) bool { return c.Name == "c" })
	switch {
	case r.Metadata.Flags&cql.RowsMetadataChanged == 0 || r.Metadata.Flags&cql.RowsNoMetadata != 0:
		t.Fatalf("EXECUTE with the old id after the columns changed: flags %#x; want Metadata_changed without No_metadata", r.Metadata.Flags)
	case len(r.Metadata.Columns) != 3 || cAt < 0:
		t.Fatalf("the new metadata: %+v; want k, c and v", r.Metadata.Columns)
	case bytes.Equal(r.Metadata.NewMetadataID, pr.ResultMetadataID) || len(r.Metadata.NewMetadataID) == 0:
		t.Fatalf("new metadata id %x; want a new one", r.Metadata.NewMetadataID)
	case len(r.Rows) != 1 || binary.BigEndian.Uint32(r.Rows[0][cAt]) != 3:
		t.Fatalf("rows %v; want the row with c = 3", r.Rows)
	}
	if again, err := exec(c, r.Metadata.NewMetadataID); err != nil || again.(cql.RowsResult).Metadata.Flags&cql.RowsNoMetadata == 0 {
		t.Errorf("EXECUTE with the new id: %+v, %v; want rows with No_metadata again", again, err)
	}
	if re := prepareStar(t, c); !bytes.Equal(re.ResultMetadataID, r.Metadata.NewMetadataID) {
		t.Errorf("prepared again: result metadata id %x; want the new one, %x", re.ResultMetadataID, r.Metadata.NewMetadataID)
	}

	// What v4 does: the rows come without metadata, three cells each, to a client whose
	// metadata (from its Prepared result) has two columns.
	r4 := old.MustResult(t, cql.Execute{ID: pr4.ID, Params: cql.QueryParams{Consistency: cql.One, Flags: cql.QuerySkipMetadata}}).(cql.RowsResult)
	if r4.Metadata.Flags&cql.RowsNoMetadata == 0 || r4.Metadata.ColumnCount != 3 || len(pr4.ResultMetadata.Columns) != 2 {
		t.Errorf("v4: flags %#x, %d columns, prepared with %d; want No_metadata, 3 columns against the client's 2 (CASSANDRA-10786)",
			r4.Metadata.Flags, r4.Metadata.ColumnCount, len(pr4.ResultMetadata.Columns))
	}
}

func TestV5KeyspaceAndNow(t *testing.T) {
	_, ap := mustServe(t, node.Config{})
	c := rawcql.Dial(t, ap.String(), cql.V5, "lz4")
	c.Query(t, "CREATE KEYSPACE v5ks2 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
	c.Query(t, "CREATE TABLE v5ks2.t (k int PRIMARY KEY, v int)")
	inKs := cql.QueryParams{Consistency: cql.One, Flags: cql.QueryWithKeyspace, Keyspace: "v5ks2"}
	// No USE: the keyspace flag names it, on QUERY, PREPARE and BATCH.
	c.MustResult(t, cql.Query{Query: "INSERT INTO t (k, v) VALUES (1, 10) USING TTL 100", Params: inKs})
	c.MustResult(t, cql.Batch{Queries: []cql.BatchQuery{{Query: "INSERT INTO t (k, v) VALUES (2, 20)"}},
		Consistency: cql.One, Flags: cql.QueryWithKeyspace, Keyspace: "v5ks2"})
	pr := c.MustResult(t, cql.Prepare{Query: "SELECT v FROM t WHERE k = ?", Keyspace: "v5ks2"}).(cql.PreparedResult)
	if pr.ResultMetadata.Columns[0].Keyspace != "v5ks2" {
		t.Errorf("prepared in %q; want v5ks2", pr.ResultMetadata.Columns[0].Keyspace)
	}
	key := []byte{0, 0, 0, 2}
	r := c.MustResult(t, cql.Execute{ID: pr.ID, ResultMetadataID: pr.ResultMetadataID, Params: cql.QueryParams{
		Consistency: cql.One, Flags: cql.QueryValues, Values: []cql.Value{{Bytes: key}}}}).(cql.RowsResult)
	if len(r.Rows) != 1 || binary.BigEndian.Uint32(r.Rows[0][0]) != 20 {
		t.Errorf("the batch's row: %v", r.Rows)
	}
	if _, err := c.Result(cql.Query{Query: "SELECT v FROM t WHERE k = 1", Params: cql.QueryParams{Consistency: cql.One}}); err == nil {
		t.Errorf("a query without the keyspace flag found t: the flag outlived its request")
	}
	// now_in_seconds moves the time TTLs are reckoned from: 200 s on, the row of TTL 100
	// is gone; without it, it is there.
	read := func(p cql.QueryParams) int {
		return len(c.MustResult(t, cql.Query{Query: "SELECT v FROM t WHERE k = 1", Params: p}).(cql.RowsResult).Rows)
	}
	later := inKs
	later.ExtFlags, later.NowInSeconds = cql.QueryNowInSeconds, int32(time.Now().Unix()+200)
	if n, m := read(inKs), read(later); n != 1 || m != 0 {
		t.Errorf("rows now %d, 200 s on %d; want 1, 0", n, m)
	}
}

// TestV5BadSegments: a segment that fails its CRC, or whose frames do not line up with
// it, gets a ProtocolError (in a segment) and the close of its connection; one whose
// length lies waits for bytes that never come and costs nothing more.
func TestV5BadSegments(t *testing.T) {
	_, ap := mustServe(t, node.Config{})
	query := func(c *rawcql.Conn) []byte {
		return c.Frame(cql.Query{Query: "SELECT * FROM system.local", Params: cql.QueryParams{Consistency: cql.One}}, 0)
	}
	tests := []struct {
		name    string
		lz4     bool
		bytes   func(c *rawcql.Conn) []byte
		wantMsg string // "" for a close without an answer
	}{
		{"payload CRC", false, func(c *rawcql.Conn) []byte {
			s := c.Segments(query(c))
			s[len(s)-1] ^= 1
			return s
		}, "Invalid segment: cql: segment CRC mismatch"},
		{"header CRC", true, func(c *rawcql.Conn) []byte {
			s := c.Segments(query(c))
			s[1] ^= 0x40
			return s
		}, "Invalid segment: cql: segment CRC mismatch"},
		{"a frame longer than its segment", false, func(c *rawcql.Conn) []byte {
			f := query(c)
			return cql.AppendSegment(nil, f[:len(f)-3], true, false)
		}, "Invalid segment: cql: frames do not line up with their segments"},
		{"a lying length", false, func(c *rawcql.Conn) []byte {
			return append(cql.AppendSegmentHeader(nil, cql.SegmentHeader{Length: cql.MaxSegmentPayload, SelfContained: true}, false), 1, 2, 3)
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			comp := ""
			if tt.lz4 {
				comp = "lz4"
			}
			c := rawcql.Dial(t, ap.String(), cql.V5, comp)
			if err := c.Write(tt.bytes(c)); err != nil {
				t.Fatal(err)
			}
			c.Net().(*net.TCPConn).CloseWrite()
			h, body, err := c.Recv()
			if tt.wantMsg == "" {
				if err == nil {
					t.Fatalf("got %s; want the connection closed", h.Opcode)
				}
				return
			}
			if err != nil {
				t.Fatalf("got %v; want a ProtocolError", err)
			}
			e, _ := cql.DecodeError(body)
			if h.Opcode != cql.OpError || e.Code != cql.ErrCodeProtocol || e.Message != tt.wantMsg {
				t.Fatalf("got %s %#x %q; want ProtocolError %q", h.Opcode, e.Code, e.Message, tt.wantMsg)
			}
			if _, _, err := c.Recv(); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("after the error: %v; want the connection closed", err)
			}
		})
	}
}

// TestAlterTableResultMetadata is CASSANDRA-10786 with the Python driver, directly
// against the node: prepare SELECT * FROM t, change t's columns (ALTER TABLE t ADD c int,
// or DROP and CREATE), execute again. The rows carry c, at v5 and at v4.
func TestAlterTableResultMetadata(t *testing.T) {
	if testing.Short() {
		t.Skip("driver suites are slow")
	}
	_, ap := mustServe(t, node.Config{})
	drivertest.RunPythonResultMetadataCases(t, options(ap, "none"))
}

// TestMetadataChangeV4Gocql shows what v4 does in CASSANDRA-10786 with a driver that
// skips the result metadata (gocql, which speaks v4 at most), with two sessions of one
// prepared SELECT *. After the table's columns change, the first session's EXECUTE gets
// Unprepared (the change evicts the statement, as in Cassandra), and gocql prepares it
// again and sees the new column. The second session still holds the old metadata: the
// statement is found under its id, the rows come without metadata, and gocql reads them
// with the column list it prepared with, so the new column is not seen.
func TestMetadataChangeV4Gocql(t *testing.T) {
	_, ap := mustServe(t, node.Config{})
	session := func() *gocql.Session {
		s, err := drivertest.Cluster(options(ap, "none")).CreateSession()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	first, s := session(), session()
	for _, q := range []string{
		"CREATE KEYSPACE gometa WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
		"CREATE TABLE gometa.t (k int PRIMARY KEY, v int)",
		"INSERT INTO gometa.t (k, v) VALUES (1, 2)",
	} {
		if err := s.Query(q).Exec(); err != nil {
			t.Fatal(err)
		}
	}
	read := func(s *gocql.Session) (map[string]any, error) {
		m := map[string]any{}
		err := s.Query("SELECT * FROM gometa.t WHERE k = ?", 1).MapScan(m)
		return m, err
	}
	for _, s := range []*gocql.Session{first, s} {
		if m, err := read(s); err != nil || len(m) != 2 {
			t.Fatalf("before: %v, %v; want k and v", m, err)
		}
	}
	for _, q := range []string{
		"ALTER TABLE gometa.t ADD c int",
		"INSERT INTO gometa.t (k, v, c) VALUES (1, 2, 3)",
	} {
		if err := s.Query(q).Exec(); err != nil {
			t.Fatal(err)
		}
	}
	if m, err := read(first); err != nil || m["c"] != 3 {
		t.Fatalf("the first session after the change: %v, %v; want c = 3 (Unprepared, then prepared again)", m, err)
	}
	m, err := read(s)
	if _, sawC := m["c"]; sawC {
		t.Fatalf("v4, the second session after the change: %v, %v; want the old column list (gocql skips the metadata)", m, err)
	}
	t.Logf("v4 after the change, the second gocql session reads %v (err %v) from the row k=1, v=2, c=3: c is not seen, and its cell is read as v (CASSANDRA-10786)", m, err)
}

// TestNowInSecondsPython: v5's now_in_seconds with the Python driver at v5, directly and
// through a sidecar: a write USING TTL 20 at N by QUERY, EXECUTE and BATCH reads TTL 10 at
// N + 10, and is gone at N + 20 and at the wall clock; N = 0 included.
func TestNowInSecondsPython(t *testing.T) {
	for _, via := range []string{"direct", "sidecar"} {
		t.Run(via, func(t *testing.T) {
			_, ap := mustServe(t, node.Config{})
			if via == "sidecar" {
				ap = mustSidecar(t, ap)
			}
			drivertest.RunPythonNowInSeconds(t, options(ap, "lz4"))
		})
	}
}
