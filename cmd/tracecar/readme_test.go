package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tracecar/tracecar/admin"
)

// readmeHost is the address the README's curl lines use.
const readmeHost = "127.0.0.1:10000"

// readmeToken is the admin token of the stack the README's lines run against.
const readmeToken = "readme-token"

// curlSections are the parts of the documents whose curl lines TestREADMECurl runs: the
// README's toggles, and the admin API of docs/operate.md.
var curlSections = []struct{ file, heading string }{
	{"README.md", "## Toggles"},
	{"docs/operate.md", "## Admin API"},
}

// TestREADMECurl runs every curl line of the README's "## Toggles" section and of the "##
// Admin API" section of docs/operate.md, parsed from the documents themselves, in order,
// against a real stack: an embedded node, a sidecar that has carried traffic, and its admin
// API with a token configured. Each line runs twice: as written, when it must get 401
// unless it sends the token or asks for /healthz; then with the token, when it must get 200
// and a body that matches what the document says of it: the JSON example in its comment,
// the effect of a POST on the matching GET, and the parts that the comment names. A
// `tracecar ctl` line after a curl line is its twin: from the state before the curl line, it
// must make the same state (for a POST), or succeed and print something (for a GET). It
// also checks that the sections cover every endpoint.
func TestREADMECurl(t *testing.T) {
	var lines []readmeLine
	for _, sec := range curlSections {
		l := curlLines(t, docSection(t, sec.file, sec.heading))
		if len(l) == 0 {
			t.Fatalf("no curl lines in %s, %s", sec.file, sec.heading)
		}
		for i := range l {
			l[i].file = sec.file
		}
		lines = append(lines, l...)
	}

	st := mustStack(t, stackConfig{AdminToken: readmeToken})
	base := st.Admin // http://127.0.0.1:port
	host := strings.TrimPrefix(base, "http://")
	rc := &readmeClient{t: t, base: base}

	// Traffic through the sidecar, recorded with threshold 0, then the defaults back.
	rc.mustOK("POST", "/storage_service/slow_query?enable=true&threshold=0")
	s := mustSession(t, st.Sidecar)
	for i := range 20 {
		var rv string
		if err := s.Query("SELECT release_version FROM system.local WHERE key = ?", "local").Scan(&rv); err != nil {
			t.Fatalf("query %d through the sidecar: %v", i, err)
		}
	}
	s.Close()
	rc.mustOK("POST", "/storage_service/slow_query?enable=false&threshold=500000")

	vars := map[string]string{"TRACECAR_ADMIN_TOKEN": readmeToken}
	covered := map[string]bool{}
	// For a ctl twin: the state before the last curl line, and after it, when it was a POST.
	var before, after adminState
	lastPost := false
	for _, line := range lines {
		name := line.file + ": " + line.cmd
		if line.assign != "" {
			name = line.file + ": " + line.assign + "=$(" + line.cmd + " | jq -r '" + line.jq + "')"
		}
		if line.ctl {
			t.Run(name, func(t *testing.T) {
				rc := &readmeClient{t: t, base: base}
				words, err := shellWords(line.cmd, vars)
				if err != nil {
					t.Fatal(err)
				}
				if lastPost {
					rc.restore(before)
				}
				args := append([]string{"ctl", "--hosts", host, "--token", readmeToken}, words[2:]...)
				var stdout, stderr strings.Builder
				if code := run(t.Context(), args, &stdout, &stderr); code != exitOK {
					t.Fatalf("tracecar %s: exit %d\n%s%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
				}
				if !lastPost {
					if stdout.Len() == 0 {
						t.Errorf("tracecar %s printed nothing", strings.Join(args, " "))
					}
					return
				}
				if got := rc.state(); !reflect.DeepEqual(got, after) {
					t.Errorf("after the ctl twin the state is %+v; want %+v, as after the curl line before it", got, after)
				}
			})
			lastPost = false
			continue
		}
		before = rc.state()
		lastPost = false
		t.Run(name, func(t *testing.T) {
			rc := &readmeClient{t: t, base: base}
			words, err := shellWords(line.cmd, vars)
			if err != nil {
				t.Fatal(err)
			}
			req, err := curlRequest(words)
			if err != nil {
				t.Fatal(err)
			}
			if req.URL.Host != readmeHost {
				t.Fatalf("host %s; want %s", req.URL.Host, readmeHost)
			}
			covered[req.Method+" "+endpointOf(req.URL.Path)] = true
			req.URL.Host, req.Host = host, host

			// As written.
			status, body := rc.do(req)
			sendsToken := req.Header.Get("Authorization") != ""
			switch {
			case sendsToken || req.URL.Path == "/healthz":
				if status != http.StatusOK {
					t.Fatalf("as written: status %d, body %s; want 200", status, body)
				}
			default:
				var e struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				}
				if status != http.StatusUnauthorized || json.Unmarshal(body, &e) != nil || e.Code != 401 || !strings.Contains(e.Message, "token") {
					t.Fatalf("as written, without the token: status %d, body %s; want 401 {\"code\":401,\"message\":\"…token…\"}", status, body)
				}
				// With the token.
				req.Header.Set("Authorization", "Bearer "+readmeToken)
				if status, body = rc.do(req); status != http.StatusOK {
					t.Fatalf("with the token: status %d, body %s; want 200", status, body)
				}
			}
			if line.assign != "" {
				v, err := jqPath(body, line.jq)
				if err != nil || v == "" {
					t.Fatalf("jq -r '%s' on %s: %q, %v; want a value", line.jq, body, v, err)
				}
				vars[line.assign] = v
				return
			}
			rc.checkBody(line, req, body, st)
			if req.Method == "POST" {
				lastPost = true
				after = rc.state()
			}
		})
	}
	for _, e := range []string{
		"GET /storage_service/slow_query", "POST /storage_service/slow_query",
		"GET /storage_service/trace_probability", "POST /storage_service/trace_probability",
		"GET /system/logger", "POST /system/logger", "GET /system/logger/{name}", "POST /system/logger/{name}",
		"GET /storage_service/logging_level", "GET /tracecar/slow_log", "GET /tracecar/sessions/{id}",
		"GET /tracecar/status", "GET /metrics", "GET /healthz", "GET /readyz",
	} {
		if !covered[e] {
			t.Errorf("no curl line for %s in docs/operate.md, \"## Admin API\"", e)
		}
	}
}

// readmeClient sends the README's requests and the checks' own, with the token.
type readmeClient struct {
	t    *testing.T
	base string
	hc   http.Client
}

func (c *readmeClient) do(req *http.Request) (int, []byte) {
	c.t.Helper()
	if req.GetBody != nil {
		b, err := req.GetBody()
		if err != nil {
			c.t.Fatal(err)
		}
		req.Body = b
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.StatusCode, body
}

// mustOK sends method path with the token and returns the body of its 200.
func (c *readmeClient) mustOK(method, path string) []byte {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+readmeToken)
	status, body := c.do(req)
	if status != http.StatusOK {
		c.t.Fatalf("%s %s: status %d, body %s; want 200", method, path, status, body)
	}
	return body
}

// getJSON GETs path with the token into v.
func (c *readmeClient) getJSON(path string, v any) {
	c.t.Helper()
	body := c.mustOK("GET", path)
	if err := json.Unmarshal(body, v); err != nil {
		c.t.Fatalf("GET %s: %s is not JSON: %v", path, body, err)
	}
}

// exampleAfterColon is a JSON example that ends a comment: "…: {"enable":false,…}".
var exampleAfterColon = regexp.MustCompile(`: ([\[{"].*|-?[0-9.]+)$`)

// exampleSuchAs is an example of the shape only: "…, a bare number such as 0.01".
var exampleSuchAs = regexp.MustCompile(`(?:such as|e\.g\.) (\S+)$`)

// checkBody checks the body of a line's 200 against what the README says of it.
func (c *readmeClient) checkBody(line readmeLine, req *http.Request, body []byte, st *stack) {
	t := c.t
	t.Helper()
	path := req.URL.Path
	if req.Method == "POST" {
		if len(body) != 0 {
			t.Errorf("POST body %q; want empty", body)
		}
		c.checkPostEffect(req)
		return
	}

	// The example in the comment, exact or truncated with "...".
	if m := exampleAfterColon.FindStringSubmatch(line.comment); m != nil {
		ex, truncated := strings.CutSuffix(m[1], ",...]")
		if truncated {
			ex += "]"
		}
		var want, got any
		if err := json.Unmarshal([]byte(ex), &want); err != nil {
			t.Fatalf("the README's example %s is not JSON: %v", m[1], err)
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("body %s is not JSON: %v", body, err)
		}
		if truncated {
			w, _ := want.([]any)
			g, ok := got.([]any)
			if !ok || len(g) < len(w) || !reflect.DeepEqual(g[:len(w)], w) {
				t.Errorf("body %s; want it to start as the README's example %s", body, m[1])
			}
		} else if !reflect.DeepEqual(got, want) {
			t.Errorf("body %s; want the README's example %s", body, m[1])
		}
	} else if m := exampleSuchAs.FindStringSubmatch(line.comment); m != nil {
		var want, got any
		if err := json.Unmarshal([]byte(m[1]), &want); err != nil {
			t.Fatalf("the README's example %s is not JSON: %v", m[1], err)
		}
		if err := json.Unmarshal(body, &got); err != nil || reflect.TypeOf(got) != reflect.TypeOf(want) {
			t.Errorf("body %s; want JSON shaped as the README's example %s", body, m[1])
		}
	}

	switch {
	case path == "/tracecar/slow_log":
		var sessions []map[string]any
		if err := json.Unmarshal(body, &sessions); err != nil {
			t.Fatalf("body %s is not an array of sessions: %v", body, err)
		}
		limit, _ := strconv.Atoi(req.URL.Query().Get("limit"))
		if len(sessions) == 0 || len(sessions) > limit {
			t.Errorf("%d sessions; want 1 to %d, the sidecar carried 20 queries with threshold 0", len(sessions), limit)
		}
		byDuration := req.URL.Query().Get("sort") == "duration"
		for i, s := range sessions {
			checkSessionShape(t, s, st)
			switch {
			case i == 0:
			case byDuration && s["duration_us"].(float64) > sessions[i-1]["duration_us"].(float64):
				t.Errorf("session %d took %v µs, more than the one before it; want slowest first", i, s["duration_us"])
			case !byDuration && s["started_at"].(string) > sessions[i-1]["started_at"].(string):
				t.Errorf("session %d started at %v, after the one before it; want newest first", i, s["started_at"])
			}
		}
	case strings.HasPrefix(path, "/tracecar/sessions/"):
		var s map[string]any
		if err := json.Unmarshal(body, &s); err != nil {
			t.Fatalf("body %s is not a session: %v", body, err)
		}
		checkSessionShape(t, s, st)
		if id := strings.TrimPrefix(path, "/tracecar/sessions/"); s["session_id"] != id {
			t.Errorf("session_id %v; want %s", s["session_id"], id)
		}
	case path == "/tracecar/status":
		// "Mode, counters, sink drops, guardrail state and logger levels"
		var status struct {
			Mode        *string           `json:"mode"`
			Counters    map[string]uint64 `json:"counters"`
			SinkDropped map[string]uint64 `json:"sink_dropped"`
			Guardrail   map[string]any    `json:"guardrail"`
			Loggers     map[string]string `json:"loggers"`
		}
		if err := json.Unmarshal(body, &status); err != nil {
			t.Fatalf("body %s: %v", body, err)
		}
		var cfg struct {
			Enable, Fast bool
		}
		c.getJSON("/storage_service/slow_query", &cfg)
		var prob float64
		c.getJSON("/storage_service/trace_probability", &prob)
		wantMode := "off"
		switch {
		case cfg.Enable && cfg.Fast:
			wantMode = "fast"
		case cfg.Enable:
			wantMode = "full"
		case prob > 0:
			wantMode = "sampled"
		}
		if status.Mode == nil || *status.Mode != wantMode {
			t.Errorf("status mode in %s; want %q for the settings %+v and probability %v", body, wantMode, cfg, prob)
		}
		if status.Counters["requests"] == 0 || status.Counters["slow_sessions"] == 0 {
			t.Errorf("status counters %v; want the sidecar's requests and recorded sessions counted", status.Counters)
		}
		if status.SinkDropped == nil || status.Guardrail == nil {
			t.Errorf("status %s; want sink_dropped and guardrail", body)
		}
		var levels []struct{ Key, Value string }
		c.getJSON("/storage_service/logging_level", &levels)
		want := map[string]string{}
		for _, l := range levels {
			if !strings.HasPrefix(l.Key, admin.NodeLoggerPrefix) { // the status has the sidecar's own
				want[l.Key] = l.Value
			}
		}
		if !reflect.DeepEqual(status.Loggers, want) {
			t.Errorf("status loggers %v; want the sidecar's logging levels %v", status.Loggers, want)
		}
	case path == "/metrics":
		// "requests by opcode, latency histogram, slow sessions, sink drops, tracing mode"
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
		if err != nil {
			t.Fatalf("body is not Prometheus text: %v", err)
		}
		for name, typ := range map[string]string{
			"tracecar_requests_total": "COUNTER", "tracecar_request_duration_seconds": "HISTOGRAM",
			"tracecar_slow_sessions_total": "COUNTER", "tracecar_sink_dropped_total": "COUNTER", "tracecar_tracing_mode": "GAUGE",
		} {
			if f := fams[name]; f == nil || f.GetType().String() != typ {
				t.Errorf("metric %s: %v; want a %s", name, f, typ)
			}
		}
		var queries float64
		if f := fams["tracecar_requests_total"]; f != nil {
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "opcode" && (l.GetValue() == "QUERY" || l.GetValue() == "EXECUTE") {
						queries += m.GetCounter().GetValue()
					}
				}
			}
		}
		if queries < 20 {
			t.Errorf("tracecar_requests_total counts %v QUERY and EXECUTE requests; want at least the test's 20", queries)
		}
	}
}

// checkPostEffect checks that a POST's parameters show in the matching GET.
func (c *readmeClient) checkPostEffect(req *http.Request) {
	t := c.t
	t.Helper()
	params := req.URL.Query()
	if req.GetBody != nil {
		b, _ := req.GetBody()
		raw, _ := io.ReadAll(b)
		form, err := url.ParseQuery(string(raw))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range form {
			params[k] = append(params[k], v...)
		}
	}
	path := req.URL.Path
	switch {
	case path == "/storage_service/slow_query":
		var got map[string]any
		c.getJSON(path, &got)
		for k := range params {
			want, err := strconv.ParseBool(params.Get(k))
			var w any = want
			if err != nil {
				n, _ := strconv.ParseFloat(params.Get(k), 64)
				w = n
			}
			if got[k] != w {
				t.Errorf("after the POST, slow_query %s = %v; want %v", k, got[k], w)
			}
		}
	case path == "/storage_service/trace_probability":
		var got float64
		c.getJSON(path, &got)
		if want, _ := strconv.ParseFloat(params.Get("probability"), 64); got != want {
			t.Errorf("after the POST, trace_probability = %v; want %v", got, want)
		}
	case path == "/system/logger":
		var levels []struct{ Key, Value string }
		c.getJSON("/storage_service/logging_level", &levels)
		for _, l := range levels {
			if l.Value != params.Get("level") {
				t.Errorf("after the POST, logger %s is at %s; want %s", l.Key, l.Value, params.Get("level"))
			}
		}
	case strings.HasPrefix(path, "/system/logger/"):
		var got string
		c.getJSON(path, &got)
		if got != params.Get("level") {
			t.Errorf("after the POST, %s = %q; want %q", path, got, params.Get("level"))
		}
	default:
		t.Errorf("no check for POST %s", path)
	}
}

// checkSessionShape checks a session record's fields: DESIGN.md's JSON names, a client on
// loopback and the embedded node as coordinator.
func checkSessionShape(t *testing.T, s map[string]any, st *stack) {
	t.Helper()
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range []string{"client", "command", "coordinator", "duration_us", "events", "mode", "parameters", "request", "session_id", "started_at"} {
		if _, ok := s[k]; !ok {
			t.Errorf("session has fields %v; want %s", keys, k)
		}
	}
	if s["coordinator"] != st.Node {
		t.Errorf("coordinator %v; want the node %s", s["coordinator"], st.Node)
	}
	if c, _ := s["client"].(string); !strings.HasPrefix(c, "127.0.0.1:") {
		t.Errorf("client %v; want the test's loopback address", s["client"])
	}
}

// jqPath evaluates the jq filters the README uses, .[N].key, on body, as jq -r would.
func jqPath(body []byte, filter string) (string, error) {
	m := regexp.MustCompile(`^\.\[(\d+)\]\.([A-Za-z_]+)$`).FindStringSubmatch(filter)
	if m == nil {
		return "", fmt.Errorf("jq filter %q is not understood by this test", filter)
	}
	var arr []map[string]any
	if err := json.Unmarshal(body, &arr); err != nil {
		return "", err
	}
	i, _ := strconv.Atoi(m[1])
	if i >= len(arr) {
		return "", fmt.Errorf("no element %d in %d", i, len(arr))
	}
	v, ok := arr[i][m[2]].(string)
	if !ok {
		return "", fmt.Errorf("element %d has no string %s", i, m[2])
	}
	return v, nil
}

// endpointOf replaces a path parameter with its name, as in DESIGN.md's table.
func endpointOf(path string) string {
	for prefix, name := range map[string]string{"/system/logger/": "{name}", "/tracecar/sessions/": "{id}"} {
		if strings.HasPrefix(path, prefix) && len(path) > len(prefix) {
			return prefix + name
		}
	}
	return path
}

// readmeLine is a command of the README: a curl line, or NAME=$(curl … | jq -r 'FILTER'),
// with the comment line above it.
type readmeLine struct {
	file    string // the document
	ctl     bool   // a tracecar ctl line: cmd is the command
	comment string
	cmd     string // the curl command
	assign  string // NAME, for an assignment
	jq      string // FILTER, for an assignment
}

var assignLine = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)=\$\((curl .*) \| jq -r '([^']*)'\)$`)

// curlLines returns the curl lines, assignments and tracecar ctl lines in the sh blocks of
// section, with backslash continuations joined, each with its comment. A block marked
// "<!-- not run: … -->" is left out.
func curlLines(tb testing.TB, section string) []readmeLine {
	tb.Helper()
	var out []readmeLine
	for _, b := range shBlocks("", section) {
		if strings.HasPrefix(b.marker, "not run: ") {
			continue
		}
		var cont, comment string
		for _, l := range b.lines {
			if cont != "" {
				l = cont + " " + strings.TrimSpace(l)
				cont = ""
			}
			if strings.HasSuffix(l, "\\") {
				cont = strings.TrimSuffix(l, "\\")
				continue
			}
			switch {
			case strings.HasPrefix(l, "#"):
				comment = strings.TrimSpace(strings.TrimPrefix(l, "#"))
				continue
			case strings.HasPrefix(l, "curl "):
				out = append(out, readmeLine{comment: comment, cmd: l})
			case strings.HasPrefix(l, "./tracecar ctl ") || l == "./tracecar ctl":
				out = append(out, readmeLine{comment: comment, cmd: l, ctl: true})
			default:
				if m := assignLine.FindStringSubmatch(l); m != nil {
					out = append(out, readmeLine{comment: comment, cmd: m[2], assign: m[1], jq: m[3]})
				}
			}
			comment = ""
		}
	}
	return out
}

// adminState is what the toggles change: the slow-query settings, the trace probability
// and the loggers' levels.
type adminState struct {
	SlowQuery   map[string]any
	Probability float64
	Loggers     map[string]string
}

// state reads the admin state.
func (c *readmeClient) state() adminState {
	c.t.Helper()
	var st adminState
	c.getJSON("/storage_service/slow_query", &st.SlowQuery)
	c.getJSON("/storage_service/trace_probability", &st.Probability)
	var levels []struct{ Key, Value string }
	c.getJSON("/storage_service/logging_level", &levels)
	st.Loggers = map[string]string{}
	for _, l := range levels {
		st.Loggers[l.Key] = l.Value
	}
	return st
}

// restore sets the admin state back to st.
func (c *readmeClient) restore(st adminState) {
	c.t.Helper()
	q := url.Values{}
	for k, v := range st.SlowQuery {
		if f, ok := v.(float64); ok {
			q.Set(k, strconv.FormatFloat(f, 'f', -1, 64))
		} else {
			q.Set(k, fmt.Sprint(v))
		}
	}
	c.mustOK("POST", "/storage_service/slow_query?"+q.Encode())
	c.mustOK("POST", "/storage_service/trace_probability?probability="+strconv.FormatFloat(st.Probability, 'g', -1, 64))
	now := c.state()
	for name, level := range st.Loggers {
		if now.Loggers[name] != level {
			c.mustOK("POST", "/system/logger/"+url.PathEscape(name)+"?level="+level)
		}
	}
}

var varRef = regexp.MustCompile(`^\$(\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)`)

// shellWords splits a command line as sh would, for the quoting the README uses: single
// quotes, double quotes, backslashes and $VAR or ${VAR} from vars outside single quotes. It
// stops at an unquoted |, ;, & or #.
func shellWords(line string, vars map[string]string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	expand := func(s string) (string, int, error) {
		m := varRef.FindString(s)
		if m == "" {
			return "$", 1, nil
		}
		name := strings.Trim(m[1:], "{}")
		v, ok := vars[name]
		if !ok {
			return "", 0, fmt.Errorf("unknown variable $%s", name)
		}
		return v, len(m), nil
	}
	for i := 0; i < len(line); {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
			i++
		case strings.IndexByte("|;&#", c) >= 0 && !inWord:
			return words, nil
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated ' in %s", line)
			}
			cur.WriteString(line[i+1 : i+1+j])
			inWord = true
			i += j + 2
		case c == '"':
			inWord = true
			i++
			for {
				if i >= len(line) {
					return nil, fmt.Errorf("unterminated \" in %s", line)
				}
				d := line[i]
				if d == '"' {
					i++
					break
				}
				switch {
				case d == '\\' && i+1 < len(line) && strings.IndexByte(`"\$`, line[i+1]) >= 0:
					cur.WriteByte(line[i+1])
					i += 2
				case d == '$':
					v, n, err := expand(line[i:])
					if err != nil {
						return nil, err
					}
					cur.WriteString(v)
					i += n
				default:
					cur.WriteByte(d)
					i++
				}
			}
		case c == '\\' && i+1 < len(line):
			cur.WriteByte(line[i+1])
			inWord = true
			i += 2
		case c == '$':
			v, n, err := expand(line[i:])
			if err != nil {
				return nil, err
			}
			cur.WriteString(v)
			inWord = true
			i += n
		default:
			cur.WriteByte(c)
			inWord = true
			i++
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// curlRequest builds the request that curl would send for words (which start with
// "curl"). It knows -X, -H, -d and the flags that change no request; any other option is an
// error, so the README stays within what this test checks.
func curlRequest(words []string) (*http.Request, error) {
	if len(words) == 0 || words[0] != "curl" {
		return nil, fmt.Errorf("not a curl command: %q", words)
	}
	method, url, body := "", "", ""
	var hasBody bool
	header := http.Header{}
	for i := 1; i < len(words); i++ {
		w := words[i]
		arg := func() (string, error) {
			if i+1 >= len(words) {
				return "", fmt.Errorf("%s needs an argument", w)
			}
			i++
			return words[i], nil
		}
		switch w {
		case "-X", "--request":
			v, err := arg()
			if err != nil {
				return nil, err
			}
			method = v
		case "-H", "--header":
			v, err := arg()
			if err != nil {
				return nil, err
			}
			k, val, ok := strings.Cut(v, ":")
			if !ok {
				return nil, fmt.Errorf("bad header %q", v)
			}
			header.Add(strings.TrimSpace(k), strings.TrimSpace(val))
		case "-d", "--data":
			v, err := arg()
			if err != nil {
				return nil, err
			}
			if hasBody {
				body += "&"
			}
			body += v
			hasBody = true
		case "-s", "--silent", "-S", "--show-error", "-f", "--fail", "-sS", "-fsS", "-i":
		default:
			if strings.HasPrefix(w, "-") {
				return nil, fmt.Errorf("option %s is not understood by this test", w)
			}
			if url != "" {
				return nil, fmt.Errorf("two URLs: %s and %s", url, w)
			}
			url = w
		}
	}
	if method == "" {
		method = "GET"
		if hasBody {
			method = "POST"
		}
	}
	var r io.Reader
	if hasBody {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		return nil, err
	}
	req.Header = header
	if hasBody && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	return req, nil
}

// TestShellWords checks the splitter on the quoting the README uses.
func TestShellWords(t *testing.T) {
	vars := map[string]string{"ID": "x-1", "T": "tok"}
	tests := []struct {
		line string
		want []string
	}{
		{`curl http://h/a`, []string{"curl", "http://h/a"}},
		{`curl -X POST 'http://h/a?b=1&c=2'`, []string{"curl", "-X", "POST", "http://h/a?b=1&c=2"}},
		{`curl "http://h/s/$ID"`, []string{"curl", "http://h/s/x-1"}},
		{`curl -H "Authorization: Bearer ${T}" http://h/`, []string{"curl", "-H", "Authorization: Bearer tok", "http://h/"}},
		{`curl '$ID' | jq .`, []string{"curl", "$ID"}},
		{`curl a\ b # comment`, []string{"curl", "a b"}},
	}
	for _, tt := range tests {
		got, err := shellWords(tt.line, vars)
		if err != nil || strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("shellWords(%s) = %q, %v; want %q", tt.line, got, err, tt.want)
		}
	}
	if _, err := shellWords(`curl "$NOPE"`, vars); err == nil {
		t.Error("unknown variable: no error")
	}
}
