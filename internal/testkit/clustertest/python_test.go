package clustertest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/internal/testkit/clustertest"
	"github.com/tracecar/tracecar/internal/testkit/drivertest"
	"github.com/tracecar/tracecar/sidecar"
)

type pyPhase struct {
	Phase      int            `json:"phase"`
	Hosts      []string       `json:"hosts"`
	Served     map[string]int `json:"served"`
	Protocol   int            `json:"protocol"`
	Errors     []string       `json:"errors"`
	ErrorCount int            `json:"error_count"`
	Timeouts   int            `json:"timeouts"`
	Up         bool           `json:"up"`
}

// TestPythonDriverThroughSidecars runs the DataStax Python driver, with
// TokenAwarePolicy(DCAwareRoundRobinPolicy()), against one of three sidecars in front of a
// three-node cluster: it must find the three sidecars and no node, spread its requests
// over all three, mark the sidecar of a node stopped under load down (without a timeout)
// and carry on, come back to it once the node is back, and no request may bypass a sidecar.
func TestPythonDriverThroughSidecars(t *testing.T) {
	drivertest.RequirePython(t)
	c := clustertest.StartCluster(t, 3, node.ClusterConfig{})
	scs := clustertest.StartSidecars(t, c, sidecar.Config{})

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, drivertest.Python, "testdata/python_cluster.py")
	cmd.Env = append(os.Environ(), "CONTACT="+scs[2].Addr.String(), "STOPPED="+scs[1].Addr.String())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	next := func(want int) pyPhase {
		t.Helper()
		if !lines.Scan() {
			cmd.Wait()
			t.Fatalf("the Python driver stopped before phase %d:\n%s", want, stderr.String())
		}
		var p pyPhase
		if err := json.Unmarshal(lines.Bytes(), &p); err != nil || p.Phase != want {
			t.Fatalf("phase %d: got %q (%v)\n%s", want, lines.Text(), err, stderr.String())
		}
		t.Logf("phase %d: %s", want, lines.Text())
		return p
	}

	var sidecars []string
	for _, sc := range scs {
		sidecars = append(sidecars, sc.Addr.String())
	}
	p := next(1)
	if !slices.Equal(p.Hosts, sidecars) {
		t.Errorf("the Python driver found hosts %v; want the sidecars %v", p.Hosts, sidecars)
	}
	for _, a := range sidecars {
		if p.Served[a] == 0 {
			t.Errorf("no request went to %s: served by %v", a, p.Served)
		}
	}

	if err := c.Stop(1); err != nil {
		t.Fatal(err)
	}
	io.WriteString(stdin, "stopped\n")
	p = next(2)
	if p.Timeouts > 0 {
		t.Errorf("%d requests timed out instead of failing fast: %v", p.Timeouts, p.Errors)
	}
	if p.Served[sidecars[1]] != 0 {
		t.Errorf("with node 2 down, requests went to its sidecar: %v", p.Served)
	}

	if err := c.Start(1); err != nil {
		t.Fatal(err)
	}
	io.WriteString(stdin, "started\n")
	p = next(3)
	if !p.Up {
		t.Errorf("the driver sends requests to sidecar 2 but has it down")
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("python: %v\n%s", err, stderr.String())
	}
	requireNoBypass(t, c, scs, 1)
}
