package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tracecar/tracecar/internal/logs"
)

// TestNodeLoginNeverSilent starts sidecars in front of a node that requires a login, with a
// wrong and then the right --node-password: with the wrong one /readyz answers 503 naming
// the node login, the tracing logger warns once (later refusals are counted, at debug
// level), /tracecar/status and ctl status show the refusal and tracecar_node_login_refused_total
// counts it; with the right one /readyz answers 200 and the status says ok.
func TestNodeLoginNeverSilent(t *testing.T) {
	nodeAddr := mustAuthNode(t, "cassandra:s3cret")
	for _, tt := range []struct {
		name, pass string
		ready      bool
	}{
		{"wrong password", "not-the-password", false},
		{"right password", "s3cret", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			logBuf := &lockedBuffer{}
			reg, err := logs.New(logs.Config{Format: "json", Writer: logBuf})
			if err != nil {
				t.Fatal(err)
			}
			defer reg.Close()
			st, err := startStack(t.Context(), stackConfig{Listen: "127.0.0.1:0", Admin: "127.0.0.1:0", RingSize: 100,
				Node: nodeAddr, NodeUsername: "cassandra", NodePassword: tt.pass}, reg, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := st.stop(); err != nil {
					t.Errorf("stop: %v", err)
				}
			}()
			// Three probes: the Connector retries at most every 5 s, so the later ones
			// read the state of the first attempt.
			for i := 0; i < 3; i++ {
				code, body := httpGet(t, st.Admin+"/readyz")
				if got := code == http.StatusOK; got != tt.ready {
					t.Fatalf("/readyz = %d %s; want ready: %v", code, body, tt.ready)
				}
				if !tt.ready && !strings.Contains(body, "login to the node as cassandra is refused") {
					t.Errorf("/readyz body %s does not name the node login", body)
				}
			}
			_, body := httpGet(t, st.Admin+"/tracecar/status")
			var status struct {
				NodeLogin *struct {
					State   string `json:"state"`
					User    string `json:"user"`
					Refused uint64 `json:"refused"`
				} `json:"node_login"`
			}
			if err := json.Unmarshal([]byte(body), &status); err != nil || status.NodeLogin == nil {
				t.Fatalf("/tracecar/status has no node_login (%v): %s", err, body)
			}
			wantState := "refused"
			if tt.ready {
				wantState = "ok"
			}
			if l := status.NodeLogin; l.State != wantState || l.User != "cassandra" || (l.Refused > 0) == tt.ready {
				t.Errorf("node_login = %+v; want state %s, user cassandra, refusals only when refused", *l, wantState)
			}
			code, out, errOut := runCtlArgs("--hosts", strings.TrimPrefix(st.Admin, "http://"), "status")
			if got := strings.Contains(out, "node_login=refused"); got == tt.ready || code != 0 {
				t.Errorf("ctl status = %d, %q %q; want node_login=refused: %v", code, out, errOut, !tt.ready)
			}
			_, metrics := httpGet(t, st.Admin+"/metrics")
			if got := !strings.Contains(metrics, "tracecar_node_login_refused_total 0"); got == tt.ready {
				t.Errorf("tracecar_node_login_refused_total: %q; want it above 0: %v", grepLines(metrics, "tracecar_node_login_refused_total"), !tt.ready)
			}
			warnings := 0
			for _, l := range strings.Split(logBuf.String(), "\n") {
				if strings.Contains(l, `"level":"warn"`) && strings.Contains(l, "refused the sidecar's own login") {
					warnings++
					if strings.Contains(l, tt.pass) {
						t.Errorf("the warning holds the password: %s", l)
					}
				}
			}
			if want := map[bool]int{false: 1, true: 0}[tt.ready]; warnings != want {
				t.Errorf("%d warnings of the refused login; want %d:\n%s", warnings, want, logBuf.String())
			}
		})
	}
}

// httpGet returns the status code and body of a GET of url.
func httpGet(tb testing.TB, url string) (int, string) {
	tb.Helper()
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
