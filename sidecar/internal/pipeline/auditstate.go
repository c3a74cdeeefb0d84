package pipeline

import (
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracecar/tracecar/audit"
	"github.com/tracecar/tracecar/internal/cql"
)

// A connection's state in the audit log (auditConn: the users, the addresses as recorded)
// and the records of a request waiting for its answer (auditReq), which the connection
// (conn.go) and its stream table (streams.go) hold; the work that makes and writes the
// records is audit.go's.

// auditConn is a connection's part in the audit log.
type auditConn struct {
	// tried is the username of the last SASL PLAIN AUTH_RESPONSE (request side), and user
	// the connection's, once the node answered it with AUTH_SUCCESS (response side). Both
	// are learnt whether the log is on or not: once per connection, not per request.
	tried, user atomic.Pointer[string]
	// source and node are the client's and the node's addresses (IP:port) as recorded,
	// made by the request side for its first record.
	source, node string
	at           time.Time // when the request being read arrived, request side
}

// auditReq is the records of one audited request, waiting for its answer.
type auditReq struct {
	recs []audit.Record
	// unknown are the records of EXECUTEs whose text was unknown when the request was
	// read: looked up again once it is answered, for a statement prepared on the process
	// that handed the connection over, whose registry arrives after the connections.
	unknown []unknownExec
	first   [1]audit.Record // recs' room for the one record of most requests
}

// appendRecord adds rec to the records of *r, made with the first one: a request none of
// whose statements is audited allocates nothing. It returns rec's index.
func appendRecord(r **auditReq, rec audit.Record) int {
	if *r == nil {
		*r = auditReqs.Get().(*auditReq)
		(*r).recs = (*r).first[:0]
	}
	(*r).recs = append((*r).recs, rec)
	return len((*r).recs) - 1
}

// auditReqs keep the records of answered requests for the next ones: a record is copied
// into the log's queue once answered, and a request with audit on would otherwise
// allocate its own (a few hundred bytes) every time.
var auditReqs = sync.Pool{New: func() any { return new(auditReq) }}

// release gives r back to auditReqs, once its records are in the log; a BATCH's many
// records are left to the collector.
func (r *auditReq) release() {
	if cap(r.recs) > len(r.first) || cap(r.unknown) > 4 {
		return
	}
	clear(r.first[:])
	*r = auditReq{unknown: r.unknown[:0]}
	auditReqs.Put(r)
}

// unknownExec is the record (its index in auditReq.recs) of an EXECUTE of id, whose text
// was unknown.
type unknownExec struct {
	rec int
	id  string
}

// username returns the connection's logged-in user, "" before a login (or without
// authentication).
func (a *auditConn) username() string {
	if u := a.user.Load(); u != nil {
		return *u
	}
	return ""
}

// loggedIn makes the username of the last AUTH_RESPONSE the connection's, once the node
// answered it with AUTH_SUCCESS.
func (a *auditConn) loggedIn() { a.user.Store(a.tried.Load()) }

// newBatchID returns a random (version 4) UUID for the children of one BATCH.
func newBatchID() string {
	var u [16]byte
	binary.LittleEndian.PutUint64(u[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(u[8:], rand.Uint64())
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return cql.FormatUUID(u)
}
