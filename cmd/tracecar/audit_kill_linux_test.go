package main

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

	"github.com/gocql/gocql"
	"golang.org/x/sys/unix"

	"github.com/tracecar/tracecar/audit"
)

// TestAuditKill9: a `tracecar sidecar` process auditing DML to a file (fsynced every
// second, the default) is killed with SIGKILL while gocql writes through it at 2,000 op/s.
// Every write acknowledged more than one fsync interval before the kill has its record in
// the file; the test counts and logs the acknowledged writes whose records were lost, all
// of them within the last interval. Each write carries its number in a comment, which the
// redaction keeps (a literal it would not).
func TestAuditKill9(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "audit")
	const fsync = time.Second
	pid, cqlAddr, _ := mustSidecarProcess(t, "--audit-dir", dir, "--audit-categories", "DML", "--audit-fsync", fsync.String())
	host, port, _ := strings.Cut(cqlAddr, ":")
	c := gocql.NewCluster(host)
	c.Port = atoi(t, port)
	c.Timeout, c.ConnectTimeout = 5*time.Second, 5*time.Second
	c.DisableInitialHostLookup = true
	s, err := c.CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, q := range []string{
		"CREATE KEYSPACE kill WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
		"CREATE TABLE kill.t (k int PRIMARY KEY, v text)",
	} {
		if err := s.Query(q).Exec(); err != nil {
			t.Fatal(err)
		}
	}
	// 10 writers of 200 op/s each, numbering their writes i*1e6 + n.
	var mu sync.Mutex
	acked := map[int]time.Time{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				id := w*1_000_000 + n
				q := fmt.Sprintf("INSERT INTO kill.t (k, v) VALUES (%d, 'x') /* w%d */", id, id)
				if s.Query(q).Exec() == nil {
					mu.Lock()
					acked[id] = time.Now()
					mu.Unlock()
				}
			}
		}()
	}
	time.Sleep(3 * time.Second)
	killed := time.Now()
	if err := unix.Kill(pid, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // writes fail from now on
	close(stop)
	wg.Wait()

	recorded := auditedWrites(t, dir)
	var before, lostBefore, lostAfter int
	for id, at := range acked {
		switch {
		case at.Before(killed.Add(-fsync)):
			before++
			if !recorded[id] {
				lostBefore++
				if lostBefore <= 3 {
					t.Errorf("write w%d acknowledged %v before the kill has no record", id, killed.Sub(at))
				}
			}
		case at.Before(killed) && !recorded[id]:
			lostAfter++
		}
	}
	if lostBefore > 0 {
		t.Errorf("%d of the %d writes acknowledged more than %v before the kill have no record", lostBefore, before, fsync)
	}
	if before < 2*1000 {
		t.Fatalf("%d writes acknowledged more than %v before the kill; want the load at about 2,000 op/s", before, fsync)
	}
	t.Logf("%d writes acknowledged in the %v before kill -9, %d of them lost from the audit file; %d acknowledged before, none lost",
		len(acked)-before, fsync, lostAfter, before)
}

// auditedWrites returns the write numbers that the audit files in dir record, from their
// complete lines (a kill may leave the last one cut).
func auditedWrites(t *testing.T, dir string) map[int]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*"+audit.FileSuffix))
	if err != nil || len(files) == 0 {
		t.Fatalf("no audit files in %s: %v", dir, err)
	}
	re := regexp.MustCompile(`/\* w(\d+) \*/`)
	got := map[int]bool{}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var r audit.Record
			if json.Unmarshal(sc.Bytes(), &r) != nil {
				continue
			}
			if m := re.FindStringSubmatch(r.Operation); m != nil && r.Category == "DML" && !r.Error {
				id, _ := strconv.Atoi(m[1])
				got[id] = true
			}
		}
		f.Close()
	}
	return got
}
