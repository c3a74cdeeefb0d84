package capturefile

import (
	"time"
)

// Magic starts every capture file.
const Magic = "TRACECAR CAPTURE"

// Version is the format version this package writes and reads.
const Version = 1

// MaxChunk bounds the raw bytes of one chunk, and so the memory a reader needs for one.
const MaxChunk = 1 << 20

// Kind is the kind of an entry.
type Kind byte

// The kinds of entries (see the package documentation).
const (
	KindHeader    Kind = 1
	KindKeyspace  Kind = 2
	KindTable     Kind = 3
	KindStatement Kind = 4
	KindName      Kind = 5
	KindRecord    Kind = 6
	KindEnd       Kind = 7
	KindConn      Kind = 8
)

// The values policies of Header.Values.
const (
	ValuesShape = "shape" // no value is written: types, lengths and keyed hashes of keys
	ValuesKeep  = "keep"  // the values are written
)

// KeyHash names how Part.Key is made, in Header.KeyHash.
const KeyHash = "hmac-sha256/64"

// KeyLen is the length of Part.Key.
const KeyLen = 8

// Header is the first entry of a capture.
type Header struct {
	Format          int       `json:"format"`
	TracecarVersion string    `json:"tracecar_version"`
	StartedAt       time.Time `json:"started_at"`
	// Values is ValuesShape or ValuesKeep.
	Values  string `json:"values"`
	KeyHash string `json:"key_hash"`
	// Node is the address of the node the sidecar fronts.
	Node string `json:"node,omitempty"`
	// Limits the capture was started with: its duration and size, 0 for none.
	DurationMS int64 `json:"duration_ms,omitempty"`
	MaxBytes   int64 `json:"max_bytes,omitempty"`
}

// Keyspace is a touched keyspace, as system_schema.keyspaces describes it.
type Keyspace struct {
	Name          string            `json:"name"`
	Replication   map[string]string `json:"replication,omitempty"`
	DurableWrites bool              `json:"durable_writes"`
	// Error says why the keyspace could not be read; the rest is then empty.
	Error string `json:"error,omitempty"`
}

// Table is a touched table, as system_schema.columns describes it.
type Table struct {
	Keyspace string   `json:"keyspace"`
	Name     string   `json:"name"`
	Columns  []Column `json:"columns,omitempty"`
	// Error says why the table could not be read; Columns are then empty.
	Error string `json:"error,omitempty"`
}

// Column kinds, as system_schema.columns.kind spells them.
const (
	PartitionKey = "partition_key"
	Clustering   = "clustering"
	Regular      = "regular"
	Static       = "static"
)

// Column is one column of a Table.
type Column struct {
	Name string `json:"name"`
	// Type is the CQL type as system_schema spells it, such as "text" or "map<text, int>".
	Type string `json:"type"`
	// Kind is PartitionKey, Clustering, Regular or Static.
	Kind string `json:"kind"`
	// Position is the column's place in the partition key or the clustering key, -1 for
	// the others.
	Position int `json:"position"`
	// ClusteringOrder is "asc" or "desc" for a clustering column, "none" otherwise.
	ClusteringOrder string `json:"clustering_order,omitempty"`
}

// Statement is one statement that records run: a prepared statement (by its text), or the
// text of a QUERY (normalized: its literals are values of the statement, see Value).
type Statement struct {
	// ID is the statement's number in this file, from 1.
	ID uint32 `json:"id"`
	// Prepared says whether the statement was prepared (EXECUTE) rather than sent as text.
	Prepared bool `json:"prepared"`
	// Text is the statement's text: with values=shape its literals are replaced by '?'
	// (Value.At says where), as in trace records; with values=keep it is as sent, but for
	// passwords. Empty for a prepared statement whose text the sidecar never saw.
	Text string `json:"text"`
	// Verb is select, insert, update, delete, batch, use, ddl or other.
	Verb string `json:"verb"`
	// Keyspace and Table are the table the statement reads or writes, "" when unknown.
	Keyspace string `json:"keyspace,omitempty"`
	Table    string `json:"table,omitempty"`
	// System says that the table is in one of the node's own keyspaces.
	System bool `json:"system,omitempty"`
	// Values are what a record of the statement carries, in its order: the bound values,
	// then (for a statement with literals) one for each literal, in the text's order.
	Values []Value `json:"values,omitempty"`
	// PK lists the Values that make the partition key, in key order; empty when the
	// statement's partition key is not known from its values.
	PK []int `json:"pk,omitempty"`
}

// Value describes one value of a statement.
type Value struct {
	// Column is the column the value is for, "" when unknown; [limit], [ttl] and
	// [timestamp] for those clauses.
	Column string `json:"column,omitempty"`
	// Type is the value's CQL type, "" when unknown.
	Type string `json:"type,omitempty"`
	// Literal, for a literal of the text, is its kind: string, integer, float, boolean,
	// blob, uuid, duration or collection; "" for a bound value.
	Literal string `json:"literal,omitempty"`
	// At is the byte offset in Text of the '?' that stands for a literal, -1 otherwise.
	At int `json:"at"`
}

// Name gives an id to a keyspace name that records carry.
type Name struct {
	ID   uint32 `json:"id"`
	Name string `json:"name"`
}

// Conn is a client connection's protocol version, written before the connection's first
// record (and again if it changes), so that a reader knows at which version each request
// was sent.
type Conn struct {
	Conn            uint32 `json:"conn"`
	ProtocolVersion byte   `json:"protocol_version"`
}

// End is the last entry of a capture.
type End struct {
	EndedAt time.Time `json:"ended_at"`
	// Reason is why the capture ended: stopped, duration, max_bytes, shutdown or an error.
	Reason  string `json:"reason"`
	Records uint64 `json:"records"`
	// Dropped counts the requests not captured because the queue was full.
	Dropped uint64 `json:"dropped"`
}

// Record is one request and its response.
type Record struct {
	// AtUS is the request's arrival, in µs since the capture started.
	AtUS int64
	// Conn is the client connection's number in the capture, from 1.
	Conn uint32
	// Opcode and Flags are the request frame's.
	Opcode byte
	Flags  byte
	// ProtocolVersion is the protocol version the connection spoke (3, 4 or 5), from the
	// connection's entry; 0 in a file written before connections had entries.
	ProtocolVersion byte
	// Keyspace is the connection's keyspace in use, "" for none.
	Keyspace string
	// Consistency and Serial are the query parameters' consistencies, -1 when absent.
	Consistency, Serial int
	// PageSize is the query parameters' page size, -1 when absent.
	PageSize int32
	// QueryFlags are the query parameters' flags.
	QueryFlags byte
	// BatchType is a BATCH's type (0 logged, 1 unlogged, 2 counter), -1 otherwise.
	BatchType int
	// Parts are the request's statements: none for a request without one, one, or a
	// batch's.
	Parts []Part

	// RespOpcode is the response's opcode. ResultKind is a RESULT's kind, ErrorCode an
	// ERROR's code, and Rows a Rows result's row count (-1 otherwise).
	RespOpcode byte
	ResultKind int32
	ErrorCode  int32
	Rows       int32
	// LatencyUS is the time from the request's arrival to its response's, at the sidecar.
	LatencyUS int64
	// ReqBytes and RespBytes are the frames' sizes.
	ReqBytes, RespBytes uint32
}

// Lengths of a Value in a Part.
const (
	LenNull    = -1
	LenUnset   = -2
	LenUnknown = -3 // not captured (a request larger than the capture copies)
)

// Part is one statement of a request.
type Part struct {
	// Statement is the statement's id, 0 when unknown.
	Statement uint32
	// Lens are the values' lengths (LenNull, LenUnset, LenUnknown or ≥ 0), in the order of
	// the statement's Values.
	Lens []int32
	// Values are the values' bytes, with values=keep only.
	Values [][]byte
	// Key is the keyed hash of the partition key, KeyLen bytes, or nil.
	Key []byte
}

// The response opcodes and result kinds a Record uses (as in the protocol).
const (
	OpError  = 0x00
	OpResult = 0x08

	ResultVoid         = 1
	ResultRows         = 2
	ResultSetKeyspace  = 3
	ResultPrepared     = 4
	ResultSchemaChange = 5
)
