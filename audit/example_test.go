package audit_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/tracecar/tracecar/audit"
)

// A Log with a file sink: what the data path checks, adds, and what the file holds once
// the Log is closed.
func Example() {
	dir, _ := os.MkdirTemp("", "audit-example")
	defer os.RemoveAll(dir)
	file, err := audit.NewFile(audit.FileConfig{Dir: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	l := audit.Open(audit.Config{Policy: audit.Block, Node: "10.0.0.5:9042", Sinks: []audit.Sink{file}})
	s, _ := audit.ParseSettings(audit.Settings{}, map[string]string{"enable": "true", "categories": "DDL,DML", "keyspaces": "shop"})
	l.Set(s)

	if l.Enabled() && l.Wants(audit.DML, "shop", "carts", "alice") {
		l.Add(audit.Record{EventTime: time.Date(2026, 12, 6, 21, 0, 0, 0, time.UTC), Source: "10.0.1.7:50412",
			Username: "alice", Category: audit.DML.String(), Operation: "INSERT INTO shop.carts (id, item) VALUES (?, ?)",
			Keyspace: "shop", Table: "carts", Consistency: "LOCAL_QUORUM"})
	}
	fmt.Println(l.Wants(audit.QUERY, "shop", "carts", "alice"), l.Wants(audit.DML, "billing", "invoices", "alice"))
	l.Close(context.Background())

	files, _ := audit.Files(dir)
	b, _ := os.ReadFile(files[0])
	fmt.Print(string(b))
	// Output:
	// false false
	// {"event_time":"2026-12-06T21:00:00Z","node":"10.0.0.5:9042","source":"10.0.1.7:50412","username":"alice","category":"DML","operation":"INSERT INTO shop.carts (id, item) VALUES (?, ?)","keyspace_name":"shop","table_name":"carts","consistency":"LOCAL_QUORUM","error":false,"error_code":0}
}
