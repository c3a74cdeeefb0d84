// Package capturetest writes the small captures that the capture and replay tests read. It
// is imported by tests only.
package capturetest

import (
	"os"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/capturefile"
)

// Columns are ks.t's columns in the captures Write writes by default: an int partition key
// k and a text column v.
var Columns = []capturefile.Column{
	{Name: "k", Type: "int", Kind: capturefile.PartitionKey, Position: 0},
	{Name: "v", Type: "text", Kind: capturefile.Regular, Position: -1},
}

// Write writes to path a capture of one table, ks.t, whose columns are cols: 200 prepared
// reads of it, one a millisecond over ten keys, each answered with one row in 100 µs.
func Write(tb testing.TB, path string, cols []capturefile.Column) {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	w, err := capturefile.NewWriter(f)
	if err != nil {
		tb.Fatal(err)
	}
	w.Header(capturefile.Header{TracecarVersion: "test", StartedAt: time.Now().UTC(), Values: capturefile.ValuesShape})
	w.Keyspace(capturefile.Keyspace{Name: "ks", Replication: map[string]string{"class": "SimpleStrategy", "replication_factor": "1"}})
	w.Table(capturefile.Table{Keyspace: "ks", Name: "t", Columns: cols})
	w.Statement(capturefile.Statement{ID: 1, Prepared: true, Text: "SELECT * FROM ks.t WHERE k = ?", Verb: "select", Keyspace: "ks", Table: "t",
		Values: []capturefile.Value{{Column: "k", Type: "int", At: -1}}, PK: []int{0}})
	for i := range 200 {
		w.Record(&capturefile.Record{AtUS: int64(i) * 1000, Conn: 1, Opcode: 0x0A, Consistency: 1, Serial: -1, PageSize: -1, BatchType: -1,
			Parts:      []capturefile.Part{{Statement: 1, Lens: []int32{4}, Key: []byte{1, 2, 3, 4, 5, 6, 7, byte(i % 10)}}},
			RespOpcode: capturefile.OpResult, ResultKind: capturefile.ResultRows, Rows: 1, LatencyUS: 100}, false)
	}
	if err := w.End(capturefile.End{EndedAt: time.Now().UTC(), Reason: "stopped", Records: 200}); err != nil {
		tb.Fatal(err)
	}
}
