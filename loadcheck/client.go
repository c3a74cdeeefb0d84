package loadcheck

import "context"

// client is one worker's connection to the target, all that the workloads need of a CQL
// client: statements prepared once, then run with values rewritten per operation. gocql
// (cqlClient) and loadcheck's own wire client (wireClient) each give one, and the
// built-in workloads' and the profiles' operations are built on it alone (newOp).
type client interface {
	// prepare readies a statement and returns its number for the calls below. A
	// statement that cannot be prepared returns the error that its every use would.
	prepare(ctx context.Context, spec stmtSpec) (int, error)
	// query runs statement st with vals, through every page, and returns the rows read.
	query(ctx context.Context, st int, vals [][]byte) (int64, error)
	// write runs statement st with vals, for its effect.
	write(ctx context.Context, st int, vals [][]byte) error
	// batch runs statement st once per row, in one batch of type typ (cql.BatchLogged,
	// BatchUnlogged or BatchCounter), each row perRow of vals; cas says the statement
	// has a condition.
	batch(ctx context.Context, typ byte, st int, vals [][]byte, perRow int, cas bool) error
}

// stmtSpec is a statement as a workload asks for it.
type stmtSpec struct {
	text string
	// cl is its consistency, the run's --cl when ""; serial its serial consistency, none
	// when "". Both were checked when the workload was read.
	cl, serial string
	// paged reads it by pages of --page-size rows; else at the client's default.
	paged bool
}
