// Package capturefile reads and writes tracecar capture files: the shape of a workload as a
// sidecar saw it, one record per request, for `tracecar capture dump|stats` and for the
// replay in `tracecar loadcheck --workload replay:FILE`.
//
// # Format, version 1
//
// A file is a preamble followed by chunks, and is written as a stream: a reader can read
// what a live capture has flushed so far, and a file cut anywhere is detected as cut.
//
//	preamble  "TRACECAR CAPTURE" (16 bytes), then the format version as a big-endian uint16
//	chunk     uvarint raw length, uvarint compressed length, CRC-32C (Castagnoli) of the raw
//	          bytes as a big-endian uint32, then the raw bytes compressed as one snappy block
//
// A chunk's raw bytes are whole entries (an entry never straddles two chunks), at most
// MaxChunk bytes. An entry is a kind byte, a uvarint length and that many bytes of payload:
//
//	1 header     JSON Header: the format, the tracecar version, the start time, the values
//	             policy (shape or keep) and how keys are hashed. Always the first entry.
//	2 keyspace   JSON Keyspace: a touched keyspace's replication, read from system_schema
//	3 table      JSON Table: a touched table's columns (name, CQL type, kind, position,
//	             clustering order), read from system_schema, or the error that prevented it
//	4 statement  JSON Statement: a statement's id in this file, its text (redacted as in
//	             traces unless values=keep), and each of its values' column and CQL type
//	5 name       JSON Name: an id for a keyspace name that records carry as the connection's
//	             keyspace in use (USE)
//	6 record     binary Record, below
//	7 end        JSON End: when and why the capture ended, the records written, the
//	             requests dropped. Always the last entry: a file without it is truncated.
//	8 conn       JSON Conn: a connection's protocol version, before its first record
//	             (files written before this entry existed have none)
//
// The header of the capture is the header entry together with the schema entries: a
// keyspace's and a table's entries come before the first statement that touches them, and
// a statement's entry before the first record that runs it, so that a reader knows all it
// needs when it meets a record.
//
// A record is a sequence of varints (u: unsigned, s: zigzag signed) and bytes:
//
//	s  arrival, µs after the previous record's arrival (the first: after the start)
//	u  connection number, from 1, in the order connections first sent a request
//	1  opcode, 1 frame flags
//	u  keyspace in use: a name id, 0 for none
//	u  consistency + 1, 0 for none; u serial consistency + 1, 0 for none
//	s  page size, -1 for none; 1 query flags; s batch type, -1 when not a batch
//	u  parts: 0 for a request without a statement, 1, or a batch's statement count
//	   per part: u statement id (0: unknown); u values; per value s length (-1 null,
//	   -2 unset, -3 not captured) and, with values=keep, the value's bytes; 1 key flag,
//	   then with the flag set 8 bytes: the keyed hash of the partition key
//	1  response opcode; s result kind (RESULT) or error code (ERROR), 0 otherwise
//	s  rows of a Rows result, -1 otherwise
//	u  latency seen by the sidecar, µs (the request's arrival to the response's)
//	u  request bytes; u response bytes
//
// With values=shape (the default) no value is ever written: a value is its type (from the
// statement) and its length, and a partition key is the first 8 bytes of an HMAC-SHA256 of
// its values, under a key drawn at random for the capture and thrown away at its end, so
// that a replay can reproduce how often each key repeats without knowing any key.
package capturefile
