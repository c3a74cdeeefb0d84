package clustertest_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/internal/testkit/clustertest"
	"github.com/tracecar/tracecar/internal/testkit/drivertest"
	"github.com/tracecar/tracecar/sidecar"
)

// TestNodeJSDriverThroughSidecars runs the Node.js driver, which reads system.peers (no
// port column) and gives every peer its configured port, token-aware against one of three
// sidecars: it must find the three sidecars, spread its requests over them, and no request
// may bypass a sidecar.
func TestNodeJSDriverThroughSidecars(t *testing.T) {
	drivertest.RequireNodeJS(t)
	c := clustertest.StartCluster(t, 3, node.ClusterConfig{})
	scs := clustertest.StartSidecars(t, c, sidecar.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "testdata/nodejs_cluster.js")
	cmd.Env = append(os.Environ(), "CONTACT="+scs[0].Addr.String())
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("node: %v\n%s%s", err, out, stderr)
	}
	t.Logf("%s", out)
	var got struct {
		Hosts  []string       `json:"hosts"`
		Served map[string]int `json:"served"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	var want []string
	for _, sc := range scs {
		want = append(want, sc.Addr.String())
	}
	if !slices.Equal(got.Hosts, want) {
		t.Errorf("the Node.js driver found hosts %v; want the sidecars %v", got.Hosts, want)
	}
	for _, a := range want {
		if got.Served[a] == 0 {
			t.Errorf("no request went to %s: served by %v", a, got.Served)
		}
	}
	requireNoBypass(t, c, scs)
}
