package reliability

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tracecar/tracecar/audit"
)

// TestHandoverAuditLoad replaces a sidecar that audits DML to a file twice by a new
// process while gocql writes through it at 2,000 op/s: every write the driver saw
// acknowledged has exactly one record in the audit files, none is lost or written twice
// across the handovers, and no write has a record without its acknowledgment. Each write
// carries its number in a comment, which the redaction keeps.
func TestHandoverAuditLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs processes")
	}
	dir := filepath.Join(t.TempDir(), "audit")
	c := startCluster(t, nil, []string{"--audit-dir", dir, "--audit-categories", "DML"})
	s := gocqlSession(t, c.addr, nil)
	mustExec(t, s, "CREATE KEYSPACE IF NOT EXISTS hoa WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
	mustExec(t, s, "CREATE TABLE IF NOT EXISTS hoa.kv (k int PRIMARY KEY, v text)")
	var mu sync.Mutex
	acked := map[int]bool{}
	l := startRateLoad(2000, 64, func(i int) error {
		err := s.Query(fmt.Sprintf("INSERT INTO hoa.kv (k, v) VALUES (%d, 'v') /* w%d */", i, i)).Exec()
		if err == nil {
			mu.Lock()
			acked[i] = true
			mu.Unlock()
		}
		return err
	})
	defer l.end()
	time.Sleep(2 * time.Second)
	for i := range 2 {
		if moved, _, _ := c.takeover(t); moved == 0 {
			t.Errorf("takeover %d moved no connection", i+1)
		}
		time.Sleep(2 * time.Second)
	}
	l.end()
	if f := l.failed.Load(); f != 0 {
		t.Errorf("%d requests failed (last: %v); want 0", f, l.lastErr.Load())
	}
	c.sc.stop() // the last process writes what it holds and syncs
	if code := c.sc.exitCode(t); code != 0 {
		t.Errorf("the last sidecar exited %d; want 0", code)
	}
	recs, unknown, total := auditRecordCounts(t, dir)
	var lost, twice, unacked int
	for i := range acked {
		switch n := recs[i]; {
		case n == 0:
			lost++
			if lost <= 10 {
				t.Logf("write w%d, sent %v into the load, has no record of its own", i, time.Duration(i)*time.Second/2000)
			}
		case n > 1:
			twice++
		}
	}
	for i := range recs {
		if !acked[i] {
			unacked++
		}
	}
	// A write prepared on the old process in the last moments before its connections
	// moved may be executed on the new one before the old one's registry arrives: its
	// record says that its text is unknown, and it cannot be told by its number, only
	// counted.
	if lost > unknown || twice != 0 || unacked != 0 || total != len(acked) {
		t.Errorf("of %d acknowledged writes, %d have no record of their own (%d records of unknown text), %d more than one; %d records of writes not acknowledged; %d DML records in all; want every write with one record",
			len(acked), lost, unknown, twice, unacked, total)
	}
	t.Logf("FIGURE %d acknowledged writes over 2 handovers, %d DML records: %d by their text, %d with the text unknown (prepared on the old process, executed on the new one)",
		len(acked), total, total-unknown, unknown)
}

// auditRecordCounts counts the records of each numbered write in the audit files in dir,
// the records of EXECUTEs whose text was unknown, and the DML records in all.
func auditRecordCounts(t *testing.T, dir string) (n map[int]int, unknown, total int) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*"+audit.FileSuffix))
	if err != nil || len(files) == 0 {
		t.Fatalf("no audit files in %s: %v", dir, err)
	}
	re := regexp.MustCompile(`/\* w(\d+) \*/`)
	n = map[int]int{}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var r audit.Record
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Errorf("%s: a line that is not a record: %v", name, err)
				continue
			}
			if r.Category != "DML" || r.Error || r.Keyspace == "hoa" && !strings.HasPrefix(r.Operation, "INSERT") {
				continue
			}
			total++
			if m := re.FindStringSubmatch(r.Operation); m != nil {
				i, _ := strconv.Atoi(m[1])
				n[i]++
			} else if strings.HasSuffix(r.Operation, "text unknown */") {
				unknown++
			}
		}
		f.Close()
	}
	return n, unknown, total
}
