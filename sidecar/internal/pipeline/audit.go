package pipeline

import (
	"github.com/tracecar/tracecar/audit"
	"github.com/tracecar/tracecar/internal/cql"
)

// The audit log on the data path. With the log off a request costs one atomic load
// (audit.Log.Enabled) and nothing else; a response costs nothing. With it on, a request
// whose statements are audited gets its records, made as it is read (auditConn.request)
// and written once the node has answered, with whether it failed and the error's code
// (auditConn.response). A login is recorded from its AUTH_RESPONSE and its answer
// (AUTH_SUCCESS, or ERROR), with the username tried and never the password; the username
// of a login that succeeded is the connection's, on every later record.

// auditOn reports whether the proxy's audit log is on: one atomic load, none without a
// log.
func auditOn(sh *Shared) bool { return sh.Audit != nil && sh.Audit.Enabled() }

// request makes the records of the request in f, or returns nil when it has none that the
// log's settings want: a QUERY, EXECUTE or BATCH gives one per statement (a BATCH's
// children share a batch_id), an AUTH_RESPONSE one login.
func (a *auditConn) request(c *Conn, f *cql.Frame, now int64) *auditReq {
	if a.source == "" {
		a.source, a.node = c.ClientAddr.String(), c.NodeAddr.String()
	}
	a.at = c.sh.audit.wallTime(now)
	var r *auditReq
	switch f.Header.Opcode {
	case cql.OpAuthResponse:
		tried := ""
		if u := a.tried.Load(); u != nil {
			tried = *u
		}
		if c.sh.Audit.Wants(audit.AUTH, "", "", tried) {
			appendRecord(&r, a.record(audit.AUTH, "LOGIN", "", "", tried, ""))
		}
	case cql.OpQuery:
		if st, ok := f.Statement(); ok {
			a.add(c, &r, c.sh.audit.get(st.Query), st.Consistency, nil)
		}
	case cql.OpExecute:
		if st, ok := f.Statement(); ok {
			a.execute(c, &r, st.ID, st.Consistency, nil)
		}
	case cql.OpBatch:
		a.batch(c, &r, f)
	}
	return r
}

// batch adds the records of a BATCH's children, which share a batch_id.
func (a *auditConn) batch(c *Conn, r **auditReq, f *cql.Frame) {
	req, ok := f.Request()
	if !ok {
		return
	}
	var id string // made with the first record
	for i := range req.Batch {
		b := &req.Batch[i]
		if b.Prepared {
			a.execute(c, r, b.ID, req.Params.Consistency, &id)
		} else {
			a.add(c, r, c.sh.audit.get(b.Query), req.Params.Consistency, &id)
		}
	}
}

// execute adds the record of an EXECUTE of the prepared statement id, as add.
func (a *auditConn) execute(c *Conn, r **auditReq, id []byte, cl cql.Consistency, batchID *string) {
	s, known := c.sh.audit.prepared(c.sh.Prepared, id)
	i := a.add(c, r, s, cl, batchID)
	if !known && i >= 0 {
		(*r).unknown = append((*r).unknown, unknownExec{i, string(id)})
	}
}

// add adds the records of the statement s (its children's, for a text BATCH) that the
// log's settings want, with the connection's keyspace for a table named without one. The
// records of a BATCH's children share *batchID, made with the first (nil: not in a
// BATCH). It returns the index of the last record added, or -1.
func (a *auditConn) add(c *Conn, r **auditReq, s *auditStmt, cl cql.Consistency, batchID *string) int {
	if s.batch != nil {
		var id string
		if batchID == nil {
			batchID = &id
		}
		last := -1
		for i := range s.batch {
			if j := a.add(c, r, &s.batch[i], cl, batchID); j >= 0 {
				last = j
			}
		}
		return last
	}
	ks := s.keyspace
	if ks == "" && s.table != "" {
		if k := c.capt.keyspace.Load(); k != nil {
			ks = *k
		}
	}
	user := a.username()
	if !c.sh.Audit.Wants(s.cat, ks, s.table, user) {
		return -1
	}
	rec := a.record(s.cat, s.op, ks, s.table, user, cl.String())
	if batchID != nil {
		if *batchID == "" {
			*batchID = newBatchID()
		}
		rec.BatchID = *batchID
	}
	return appendRecord(r, rec)
}

// record makes a record of the request being read, at the time it arrived.
func (a *auditConn) record(cat audit.Category, op, ks, table, user, cl string) audit.Record {
	return audit.Record{EventTime: a.at, Node: a.node, Source: a.source, Username: user, Category: cat.String(),
		Operation: op, Keyspace: ks, Table: table, Consistency: cl}
}

// response writes the records of r once the node answered with the response in f: failed
// when it is an ERROR, with its code. An AUTH_CHALLENGE answers a step of a login that
// goes on: it writes nothing, and the next step's AUTH_RESPONSE is recorded with its answer.
func (a *auditConn) response(c *Conn, f *cql.Frame, r *auditReq) {
	if f.Header.Opcode == cql.OpAuthChallenge {
		r.release()
		return
	}
	var code int32
	failed := f.Header.Opcode == cql.OpError
	if failed {
		code = f.Response().ErrCode // 0 when unreadable
	}
	for _, u := range r.unknown {
		if s, known := c.sh.audit.prepared(c.sh.Prepared, []byte(u.id)); known {
			rec := &r.recs[u.rec]
			rec.Category, rec.Operation, rec.Keyspace, rec.Table = s.cat.String(), s.op, s.keyspace, s.table
		}
	}
	for i := range r.recs {
		rec := &r.recs[i]
		rec.Error, rec.ErrorCode = failed, code
		c.sh.Audit.Add(*rec)
	}
	r.release()
}
