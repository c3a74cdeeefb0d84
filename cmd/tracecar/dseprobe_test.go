package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/internal/testkit/drivertest"
)

// TestDSEProbeLoggedAsProbe: the Python driver at its defaults offers DSE_V2 (0x42) first,
// a normal step of its negotiation. At debug level the sidecar logs it as that probe,
// answered as Cassandra answers it, and never as "unsupported protocol version", which
// reads like an error (issue 47, finding 9).
func TestDSEProbeLoggedAsProbe(t *testing.T) {
	drivertest.RequirePython(t)
	var buf lockedBuffer
	reg, err := logs.New(logs.Config{Writer: &buf, Format: "json", Level: "debug"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := stackConfig{Listen: "127.0.0.1:0", Admin: "127.0.0.1:0", RingSize: 100}
	st, err := startStack(context.Background(), cfg, reg, &buf)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		st.stop()
		reg.Close()
	}()
	host, port := splitHostPort(t, st.Sidecar)
	script := `import sys
from cassandra.cluster import Cluster
c = Cluster([sys.argv[1]], port=int(sys.argv[2]), connect_timeout=10, control_connection_timeout=10)
c.connect()
print(c.protocol_version)
c.shutdown()`
	out, err := exec.Command(drivertest.Python, "-c", script, host, port).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "5" {
		t.Fatalf("the Python driver: %v, %s; want protocol 5", err, out)
	}
	log := buf.String()
	if strings.Contains(log, "unsupported protocol version") {
		t.Errorf("the driver's probe is logged as an unsupported version:\n%s", log)
	}
	found := false
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "DSE protocol probe (DSE_V2)") {
			found = true
			if !strings.Contains(line, `"level":"debug"`) || !strings.Contains(line, `"version":"0x42"`) {
				t.Errorf("the probe's line: %s; want level debug and version 0x42", line)
			}
		}
	}
	if !found {
		t.Errorf("no line names the driver's DSE_V2 probe:\n%s", log)
	}
}
