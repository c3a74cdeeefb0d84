package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tracecar/tracecar/admin"
	"github.com/tracecar/tracecar/cql"
	"github.com/tracecar/tracecar/metrics"
	"github.com/tracecar/tracecar/tracing"
)

// readmeHost is the address the README's curl lines use.
const readmeHost = "127.0.0.1:10000"

// TestREADMECurl runs every curl line of the README's "## Admin API" section against a live
// server with a real tracing.Tracer that holds one recorded session, and checks that each
// gets a 2xx with a body that parses. It also checks that the section covers every endpoint.
func TestREADMECurl(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := curlLines(t, string(b))
	if len(lines) == 0 {
		t.Fatal("no curl lines in the README's Admin API section")
	}

	tr := tracing.New(tracing.Options{})
	t.Cleanup(func() { tr.Close(context.Background()) })
	id := mustRecordSession(t, tr)
	m := metrics.New()
	m.Request(cql.OpQuery)
	f := mustServe(t, admin.Config{}, tr, admin.WithMetrics(m))
	host := strings.TrimPrefix(f.url, "http://")
	vars := map[string]string{"SESSION_ID": id, "TRACECAR_ADMIN_TOKEN": "unused"}

	covered := map[string]bool{}
	for _, line := range lines {
		t.Run(line, func(t *testing.T) {
			words, err := shellWords(line, vars)
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
			req.URL.Host = host
			req.Host = host
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode < 200 || resp.StatusCode > 299 {
				t.Fatalf("status %d, body %s; want 2xx", resp.StatusCode, body)
			}
			ct := resp.Header.Get("Content-Type")
			switch {
			case len(body) == 0:
			case strings.HasPrefix(ct, "application/json"):
				var v any
				if err := json.Unmarshal(body, &v); err != nil {
					t.Errorf("body %s is not JSON: %v", body, err)
				}
			case strings.HasPrefix(ct, "text/plain"):
				p := expfmt.NewTextParser(model.UTF8Validation)
				if _, err := p.TextToMetricFamilies(strings.NewReader(string(body))); err != nil {
					t.Errorf("body is not Prometheus text: %v", err)
				}
			default:
				t.Errorf("unexpected Content-Type %q", ct)
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
			t.Errorf("the README's Admin API section has no curl line for %s", e)
		}
	}
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

// mustRecordSession runs one QUERY through tr in full mode with a threshold of 0, so that
// it is recorded, restores the default configuration and returns the session's id.
func mustRecordSession(tb testing.TB, tr *tracing.Tracer) string {
	tb.Helper()
	if err := tr.SetConfig(tracing.Config{Enable: true, ThresholdMicros: 0, TTLSeconds: 60}); err != nil {
		tb.Fatal(err)
	}
	conn := tr.NewConn(netip.MustParseAddrPort("127.0.0.1:50123"), netip.MustParseAddrPort("127.0.0.1:9042"))
	q := cql.Query{Query: "SELECT release_version FROM system.local", Params: cql.QueryParams{Consistency: cql.LocalOne}}
	reqFrame, err := cql.AppendRequestFrame(nil, cql.Header{Version: cql.V4, Stream: 1}, nil, q, nil)
	if err != nil {
		tb.Fatal(err)
	}
	respFrame, err := cql.AppendResponseFrame(nil, cql.Header{Version: cql.V4 | cql.ResponseBit, Stream: 1}, cql.ResponsePrefix{}, cql.VoidResult{}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	rh, err := cql.ParseHeader(reqFrame)
	if err != nil {
		tb.Fatal(err)
	}
	sh, err := cql.ParseHeader(respFrame)
	if err != nil {
		tb.Fatal(err)
	}
	conn.OnRequest(rh, reqFrame, nil)
	conn.Sent(1)
	conn.OnResponse(sh, respFrame, nil)
	conn.ResponseSent(1)
	conn.Close()
	if err := tr.SetConfig(tracing.DefaultConfig()); err != nil {
		tb.Fatal(err)
	}
	got := tr.SlowLog(1)
	if len(got) != 1 {
		tb.Fatalf("tracer recorded %d sessions; want 1", len(got))
	}
	return got[0].ID
}

// curlLines returns the lines starting with "curl" in the sh blocks of the README's
// "## Admin API" section, with backslash continuations joined.
func curlLines(tb testing.TB, readme string) []string {
	tb.Helper()
	_, section, ok := strings.Cut(readme, "\n## Admin API\n")
	if !ok {
		tb.Fatal("README has no \"## Admin API\" section")
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	var out []string
	inSh := false
	var cont string
	for _, l := range strings.Split(section, "\n") {
		switch {
		case !inSh && strings.HasPrefix(l, "```sh"):
			inSh = true
			continue
		case inSh && strings.HasPrefix(l, "```"):
			inSh = false
			continue
		case !inSh:
			continue
		}
		if cont != "" {
			l = cont + " " + strings.TrimSpace(l)
			cont = ""
		}
		if strings.HasSuffix(l, "\\") {
			cont = strings.TrimSuffix(l, "\\")
			continue
		}
		if strings.HasPrefix(l, "curl ") {
			out = append(out, l)
		}
	}
	return out
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
