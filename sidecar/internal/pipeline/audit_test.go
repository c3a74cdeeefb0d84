package pipeline

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tracecar/tracecar/audit"
	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/tracing"
)

func TestClassifyStmt(t *testing.T) {
	for _, tc := range []struct {
		q         string
		cat       audit.Category
		ks, table string
	}{
		{"SELECT * FROM ks.t WHERE k = 1", audit.QUERY, "ks", "t"},
		{"select v from T", audit.QUERY, "", "t"},
		{"INSERT INTO ks.t (k) VALUES (1)", audit.DML, "ks", "t"},
		{"UPDATE \"Ks\".t SET v = 1 WHERE k = 2", audit.DML, "Ks", "t"},
		{"DELETE FROM ks.t WHERE k = 1", audit.DML, "ks", "t"},
		{"TRUNCATE TABLE ks.t", audit.DML, "ks", "t"},
		{"USE ks", audit.DML, "ks", ""},
		{"BEGIN BATCH INSERT INTO ks.t (k) VALUES (1) APPLY BATCH", audit.DML, "", ""},
		{"CREATE KEYSPACE IF NOT EXISTS ks WITH replication = {}", audit.DDL, "ks", ""},
		{"ALTER KEYSPACE ks WITH durable_writes = false", audit.DDL, "ks", ""},
		{"DROP KEYSPACE IF EXISTS ks", audit.DDL, "ks", ""},
		{"CREATE TABLE ks.t (k int PRIMARY KEY)", audit.DDL, "ks", "t"},
		{"create columnfamily t (k int primary key)", audit.DDL, "", "t"},
		{"ALTER TABLE ks.t ADD v text", audit.DDL, "ks", "t"},
		{"DROP TABLE IF EXISTS ks.t", audit.DDL, "ks", "t"},
		{"CREATE TYPE ks.addr (street text)", audit.DDL, "ks", ""},
		{"CREATE INDEX IF NOT EXISTS i ON ks.t (v)", audit.DDL, "ks", "t"},
		{"CREATE CUSTOM INDEX ON ks.t (v) USING 'x'", audit.DDL, "ks", "t"},
		{"DROP INDEX ks.i", audit.DDL, "ks", ""},
		{"CREATE MATERIALIZED VIEW ks.mv AS SELECT * FROM ks.t", audit.DDL, "ks", "mv"},
		{"CREATE OR REPLACE FUNCTION ks.f (a int) RETURNS NULL ON NULL INPUT RETURNS int LANGUAGE lua AS 'return a'", audit.DDL, "ks", ""},
		{"CREATE AGGREGATE ks.a (int) SFUNC f STYPE int", audit.DDL, "ks", ""},
		{"CREATE TRIGGER tr ON ks.t USING 'c'", audit.DDL, "ks", "t"},
		{"CREATE ROLE r WITH PASSWORD = 'secret' AND LOGIN = true", audit.DCL, "", ""},
		{"ALTER USER u WITH PASSWORD 'x'", audit.DCL, "", ""},
		{"DROP ROLE r", audit.DCL, "", ""},
		{"GRANT SELECT ON ks.t TO r", audit.DCL, "", ""},
		{"REVOKE SELECT ON ks.t FROM r", audit.DCL, "", ""},
		{"LIST ROLES", audit.DCL, "", ""},
		{"LIST ALL PERMISSIONS OF r", audit.DCL, "", ""},
		{"CREATE SERVICE LEVEL sl", audit.ADMIN, "", ""},
		{"ATTACH SERVICE LEVEL sl TO r", audit.ADMIN, "", ""},
		{"LIST ALL SERVICE LEVELS", audit.ADMIN, "", ""},
		{"LIST SERVICE LEVEL sl", audit.ADMIN, "", ""},
		{"LIST ATTACHED SERVICE LEVEL OF r", audit.ADMIN, "", ""},
		{"list all attached service levels", audit.ADMIN, "", ""},
		{"LIST EFFECTIVE SERVICE LEVEL OF r", audit.ADMIN, "", ""},
		{"LIST ALL ROLES", audit.DCL, "", ""},
	} {
		cat, ks, table := classifyStmt(tc.q)
		if cat != tc.cat || ks != tc.ks || table != tc.table {
			t.Errorf("classifyStmt(%q) = %v %q %q; want %v %q %q", tc.q, cat, ks, table, tc.cat, tc.ks, tc.table)
		}
	}
}

func TestBatchChildren(t *testing.T) {
	q := "BEGIN UNLOGGED BATCH USING TIMESTAMP 1 INSERT INTO t (k, v) VALUES (1, 'a;b'); UPDATE t SET v = 'x' WHERE k = 2 DELETE FROM ks.u WHERE k IN (1, 2) APPLY BATCH"
	want := []string{"INSERT INTO t (k, v) VALUES (1, 'a;b')", "UPDATE t SET v = 'x' WHERE k = 2", "DELETE FROM ks.u WHERE k IN (1, 2)"}
	if got := batchChildren(q); !slices.Equal(got, want) {
		t.Errorf("batchChildren = %q; want %q", got, want)
	}
}

// memSink keeps what the audit log writes.
type memSink struct {
	mu   sync.Mutex
	recs []audit.Record
}

func (m *memSink) Name() string { return "mem" }
func (m *memSink) Write(_ context.Context, recs []audit.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs = append(m.recs, recs...)
	return nil
}
func (m *memSink) Sync(context.Context) error  { return nil }
func (m *memSink) Close(context.Context) error { return nil }

// auditedConn is a Conn with an audit log on, in every category, writing to a memSink.
type auditedConn struct {
	c      *Conn
	log    *audit.Log
	sink   *memSink
	stream int16
}

func newAuditedConn(t *testing.T, s audit.Settings) *auditedConn {
	t.Helper()
	a := &auditedConn{c: fuzzConn(0), sink: &memSink{}}
	a.log = audit.New(audit.Block, 64, a.sink)
	a.log.Set(s)
	a.c.sh.Audit = a.log
	a.c.Version = cql.V4
	return a
}

// exchange runs the request req and the node's answer resp through the pipeline.
func (a *auditedConn) exchange(t *testing.T, req, resp cql.Message) {
	t.Helper()
	a.stream++
	reqF, err := cql.AppendFrameCompressed(nil, cql.Header{Version: cql.V4, Stream: a.stream}, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := cql.ParseHeader(reqF)
	a.c.Request(h, reqF, len(reqF), nil)
	r, ok, _ := a.c.Streams.Take(a.stream)
	if !ok {
		t.Fatal("request not in flight")
	}
	rh := cql.Header{Version: cql.ResponseBit | cql.V4, Stream: a.stream}
	respF, err := cql.AppendResponseFrame(nil, rh, cql.ResponsePrefix{}, resp, nil)
	if err != nil {
		t.Fatal(err)
	}
	rh, _ = cql.ParseHeader(respF)
	a.c.Response(rh, respF, &r, new(int64))
}

// records closes the log and returns what it wrote.
func (a *auditedConn) records(t *testing.T) []audit.Record {
	t.Helper()
	if err := a.log.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return a.sink.recs
}

func allCategories() uint8 {
	return 1<<audit.AUTH | 1<<audit.DDL | 1<<audit.DCL | 1<<audit.DML | 1<<audit.QUERY | 1<<audit.ADMIN
}

func plainToken(user, password string) []byte { return []byte("\x00" + user + "\x00" + password) }

const marker = "MARKER-7f3a"

// TestAuditRecords: one record per statement, written once the node answered, with its
// category, keyspace, table, consistency, the connection's user and whether it failed;
// logins with the username tried; a BATCH's children sharing a batch_id; EXECUTEs with
// their prepared text, or saying that it is unknown; and neither a literal nor a password
// in any record.
func TestAuditRecords(t *testing.T) {
	a := newAuditedConn(t, audit.Settings{Enabled: true, Categories: allCategories()})
	one := cql.QueryParams{Consistency: cql.One}
	q := func(s string) cql.Message {
		return cql.Query{Query: s, Params: cql.QueryParams{Consistency: cql.Quorum}}
	}
	a.exchange(t, cql.AuthResponse{Token: plainToken("mallory", "wrong-"+marker)}, cql.Error{Code: cql.ErrCodeBadCredentials, Message: "bad"})
	a.exchange(t, cql.AuthResponse{Token: plainToken("alice", "pw-"+marker)}, cql.AuthSuccess{})
	a.exchange(t, q("USE ks"), cql.SetKeyspaceResult{Keyspace: "ks"})
	a.exchange(t, q("INSERT INTO t (k, v) VALUES (1, '"+marker+"')"), cql.VoidResult{})
	a.exchange(t, q("SELECT * FROM other.t WHERE k = '"+marker+"'"), cql.Error{Code: cql.ErrCodeInvalid, Message: "no"})
	a.exchange(t, q("CREATE ROLE bob WITH PASSWORD = '"+marker+"' AND LOGIN = true"), cql.VoidResult{})
	a.exchange(t, cql.Prepare{Query: "UPDATE ks.t SET v = ? WHERE k = ?"}, cql.PreparedResult{ID: []byte("prepared-id-0001")})
	a.exchange(t, cql.Execute{ID: []byte("prepared-id-0001"), Params: one}, cql.VoidResult{})
	a.exchange(t, cql.Execute{ID: []byte{0xca, 0xfe}, Params: one}, cql.VoidResult{})
	a.exchange(t, cql.Batch{Queries: []cql.BatchQuery{{Query: "INSERT INTO ks.t (k, v) VALUES (2, '" + marker + "')"},
		{Prepared: true, ID: []byte("prepared-id-0001")}}, Consistency: cql.LocalQuorum}, cql.VoidResult{})
	a.exchange(t, q("BEGIN BATCH DELETE FROM ks.t WHERE k = 3; INSERT INTO ks.u (k) VALUES (4) APPLY BATCH"), cql.VoidResult{})
	recs := a.records(t)

	type want struct {
		cat, user, op, ks, table, cl string
		err                          bool
		code                         int32
		batch                        int // 0: none; records with the same n share a batch_id
	}
	wants := []want{
		{"AUTH", "mallory", "LOGIN", "", "", "", true, cql.ErrCodeBadCredentials, 0},
		{"AUTH", "alice", "LOGIN", "", "", "", false, 0, 0},
		{"DML", "alice", "USE ks", "ks", "", "QUORUM", false, 0, 0},
		{"DML", "alice", "INSERT INTO t (k, v) VALUES (?, ?)", "ks", "t", "QUORUM", false, 0, 0},
		{"QUERY", "alice", "SELECT * FROM other.t WHERE k = ?", "other", "t", "QUORUM", true, cql.ErrCodeInvalid, 0},
		{"DCL", "alice", "CREATE ROLE bob WITH PASSWORD = ? AND LOGIN = ?", "", "", "QUORUM", false, 0, 0},
		{"DML", "alice", "UPDATE ks.t SET v = ? WHERE k = ?", "ks", "t", "ONE", false, 0, 0},
		{"DML", "alice", "EXECUTE cafe " + unknownPrepared, "", "", "ONE", false, 0, 0},
		{"DML", "alice", "INSERT INTO ks.t (k, v) VALUES (?, ?)", "ks", "t", "LOCAL_QUORUM", false, 0, 1},
		{"DML", "alice", "UPDATE ks.t SET v = ? WHERE k = ?", "ks", "t", "LOCAL_QUORUM", false, 0, 1},
		{"DML", "alice", "DELETE FROM ks.t WHERE k = ?", "ks", "t", "QUORUM", false, 0, 2},
		{"DML", "alice", "INSERT INTO ks.u (k) VALUES (?)", "ks", "u", "QUORUM", false, 0, 2},
	}
	if len(recs) != len(wants) {
		for _, r := range recs {
			t.Logf("%+v", r)
		}
		t.Fatalf("%d records; want %d", len(recs), len(wants))
	}
	batchIDs := map[int]string{}
	for i, w := range wants {
		r := recs[i]
		if r.Category != w.cat || r.Username != w.user || r.Operation != w.op || r.Keyspace != w.ks ||
			r.Table != w.table || r.Consistency != w.cl || r.Error != w.err || r.ErrorCode != w.code {
			t.Errorf("record %d = %+v; want %+v", i, r, w)
		}
		if r.Source != "127.0.0.1:1" || r.Node != "127.0.0.1:9042" || r.EventTime.IsZero() {
			t.Errorf("record %d: source %q, node %q, time %v; want the addresses and a time", i, r.Source, r.Node, r.EventTime)
		}
		switch {
		case w.batch == 0 && r.BatchID != "":
			t.Errorf("record %d: batch_id %q outside a batch", i, r.BatchID)
		case w.batch != 0 && r.BatchID == "":
			t.Errorf("record %d: no batch_id in a batch", i)
		case w.batch != 0 && batchIDs[w.batch] == "":
			batchIDs[w.batch] = r.BatchID
		case w.batch != 0 && batchIDs[w.batch] != r.BatchID:
			t.Errorf("record %d: batch_id %q; want %q, its batch's", i, r.BatchID, batchIDs[w.batch])
		}
	}
	if batchIDs[1] == batchIDs[2] {
		t.Errorf("two batches share batch_id %q", batchIDs[1])
	}
	js, _ := json.Marshal(recs)
	if strings.Contains(string(js), marker) || strings.Contains(string(js), "pw-") {
		t.Errorf("a literal or password in the records: %s", js)
	}
}

// TestAuditFilters: the settings' categories, keyspaces, tables and excluded users choose
// the records, and a user excluded is excluded from the login it makes too.
func TestAuditFilters(t *testing.T) {
	q := func(s string) cql.Message { return cql.Query{Query: s, Params: cql.QueryParams{Consistency: cql.One}} }
	a := newAuditedConn(t, audit.Settings{Enabled: true, Categories: 1<<audit.DML | 1<<audit.AUTH | 1<<audit.DDL,
		Tables: map[string]bool{"ks.t": true}, ExcludeUsers: map[string]bool{"bot": true}})
	a.exchange(t, cql.AuthResponse{Token: plainToken("bot", "x")}, cql.AuthSuccess{})
	a.exchange(t, q("INSERT INTO ks.t (k) VALUES (1)"), cql.VoidResult{}) // bot: excluded
	a.exchange(t, cql.AuthResponse{Token: plainToken("alice", "x")}, cql.AuthSuccess{})
	a.exchange(t, q("INSERT INTO ks.t (k) VALUES (1)"), cql.VoidResult{})
	a.exchange(t, q("INSERT INTO ks.u (k) VALUES (1)"), cql.VoidResult{}) // another table
	a.exchange(t, q("SELECT * FROM ks.t"), cql.VoidResult{})              // QUERY not audited
	a.exchange(t, q("ALTER TABLE ks.t ADD v int"), cql.VoidResult{})
	a.exchange(t, q("CREATE ROLE r"), cql.VoidResult{}) // DCL not audited
	var got []string
	for _, r := range a.records(t) {
		got = append(got, r.Category+" "+r.Username+" "+r.Operation)
	}
	want := []string{"AUTH alice LOGIN", "DML alice INSERT INTO ks.t (k) VALUES (?)", "DDL alice ALTER TABLE ks.t ADD v int"}
	if !slices.Equal(got, want) {
		t.Errorf("records %q; want %q", got, want)
	}
}

// TestAuditOffAllocs: with an audit log that is off, a request and its response allocate
// nothing, as without one (the sidecar's TestRequestPathAllocs covers the whole path).
func TestAuditOffAllocs(t *testing.T) {
	a := newAuditedConn(t, audit.Settings{})
	defer a.log.Close(context.Background())
	req := cql.Query{Query: "INSERT INTO ks.t (k, v) VALUES (1, 2)", Params: cql.QueryParams{Consistency: cql.One}}
	reqF, _ := cql.AppendFrameCompressed(nil, cql.Header{Version: cql.V4, Stream: 1}, req, nil)
	respF, _ := cql.AppendResponseFrame(nil, cql.Header{Version: cql.ResponseBit | cql.V4, Stream: 1}, cql.ResponsePrefix{}, cql.VoidResult{}, nil)
	h, _ := cql.ParseHeader(reqF)
	rh, _ := cql.ParseHeader(respF)
	one := func() {
		a.c.Request(h, reqF, len(reqF), nil)
		r, _, _ := a.c.Streams.Take(1)
		a.c.Response(rh, respF, &r, new(int64))
	}
	for range 100 {
		one()
	}
	if n := testing.AllocsPerRun(1000, one); n != 0 {
		t.Errorf("%v allocations per request with the audit log off; want 0", n)
	}
}

// TestAuditLearnsTextLate: an EXECUTE whose text is unknown when it is read, and known by
// the time it is answered (a statement prepared on the process that handed the connection
// over, whose registry arrives after the connections), is recorded with its text.
func TestAuditLearnsTextLate(t *testing.T) {
	a := newAuditedConn(t, audit.Settings{Enabled: true, Categories: allCategories()})
	id := []byte("prepared-id-late")
	reqF, _ := cql.AppendFrameCompressed(nil, cql.Header{Version: cql.V4, Stream: 1}, cql.Execute{ID: id, Params: cql.QueryParams{Consistency: cql.One}}, nil)
	respF, _ := cql.AppendResponseFrame(nil, cql.Header{Version: cql.ResponseBit | cql.V4, Stream: 1}, cql.ResponsePrefix{}, cql.VoidResult{}, nil)
	h, _ := cql.ParseHeader(reqF)
	rh, _ := cql.ParseHeader(respF)
	a.c.Request(h, reqF, len(reqF), nil)
	a.c.sh.Prepared.Put(id, tracing.Statement{Query: "DELETE FROM t WHERE k = ?", Keyspace: "ks"})
	r, _, _ := a.c.Streams.Take(1)
	a.c.Response(rh, respF, &r, new(int64))
	recs := a.records(t)
	if len(recs) != 1 || recs[0].Operation != "DELETE FROM t WHERE k = ?" || recs[0].Keyspace != "ks" || recs[0].Table != "t" {
		t.Errorf("records %+v; want the DELETE's, on ks.t", recs)
	}
}

// TestAuditReadsWhatItNeeds: a frame too large for the transport's buffer is read whole
// rather than streamed unread when the audit needs it: every request while the log is on,
// and the ERROR answering an audited request (its code); not a RESULT, whose opcode is
// enough.
func TestAuditReadsWhatItNeeds(t *testing.T) {
	a := newAuditedConn(t, audit.Settings{})
	defer a.log.Close(context.Background())
	h := cql.Header{Version: cql.V4, Opcode: cql.OpExecute}
	if a.c.ReadsRequest(h) {
		t.Error("an EXECUTE is read whole with the audit log off")
	}
	a.log.Set(audit.Settings{Enabled: true, Categories: allCategories()})
	if !a.c.ReadsRequest(h) {
		t.Error("an EXECUTE is streamed unread with the audit log on")
	}
	req := Inflight{aud: &auditReq{}}
	if !a.c.ReadsResponse(cql.Header{Version: cql.ResponseBit | cql.V4, Opcode: cql.OpError}, &req) {
		t.Error("the ERROR answering an audited request is streamed unread")
	}
	if a.c.ReadsResponse(cql.Header{Version: cql.ResponseBit | cql.V4, Opcode: cql.OpResult}, &req) {
		t.Error("the RESULT answering an audited request is read whole")
	}
}
