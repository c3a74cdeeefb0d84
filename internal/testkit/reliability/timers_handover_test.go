package reliability

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/audit"
)

// TestHandoverKeepsTimers: a toggle's timer (for=8s) set on one sidecar process moves to
// the successor of a takeover with its remaining time, not afresh, and the successor puts
// the setting back when it is up: once, with one ADMIN record of the expiry in the audit
// log (the old process, stopped, writes none) and one count of it.
func TestHandoverKeepsTimers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs processes")
	}
	dir := filepath.Join(t.TempDir(), "audit")
	c := startCluster(t, nil, []string{"--audit-dir", dir, "--audit-enable=false"})
	c.post(t, "/tracecar/audit?enable=true&categories=ADMIN")
	c.post(t, "/storage_service/slow_query?enable=true&fast=false&for=8s")
	before := c.status(t).Timers
	if len(before) != 1 {
		t.Fatalf("timers before the takeover %+v; want one", before)
	}
	c.takeover(t)
	after := c.status(t).Timers
	if len(after) != 1 || after[0].Due.Sub(before[0].Due).Abs() > time.Second || after[0].Settings[0] != before[0].Settings[0] {
		t.Fatalf("timers after the takeover %+v; want the one of before, due as before: %+v", after, before)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var sq admin.SlowQuery
		if err := json.Unmarshal(c.get(t, "/storage_service/slow_query"), &sq); err != nil {
			t.Fatal(err)
		}
		if !sq.Enable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slow_query %+v 30s after the takeover; want it put back by the timer", sq)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := metric(t, c.api, `tracecar_toggle_expiries_total{toggle="POST /storage_service/slow_query"}`); n != 1 {
		t.Errorf("successor counted %v expiries; want 1", n)
	}
	c.sc.stop()
	files, err := audit.Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	var expiries []string
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var r audit.Record
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("%s: %q: %v", name, sc.Text(), err)
			}
			if r.Category == "ADMIN" && strings.HasPrefix(r.Operation, "EXPIRE ") {
				expiries = append(expiries, r.Username+": "+r.Operation)
			}
		}
		f.Close()
	}
	want := `timer: EXPIRE POST /storage_service/slow_query: slow_query.enable="false" slow_query.fast="false"`
	if strings.Join(expiries, "\n") != want {
		t.Errorf("expiry records in the audit log:\n%s\nwant one:\n%s", strings.Join(expiries, "\n"), want)
	}
}
