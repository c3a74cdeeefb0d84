package loadcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tracecar/tracecar/admin/adminapi"
	"github.com/tracecar/tracecar/internal/cql"
)

// apiClient calls the sidecar's admin API and the node's API, as a user's curl would.
type apiClient struct {
	admin, node adminapi.Client // one token for every admin surface
	adminURL    string          // base URLs without a trailing slash
	nodeURL     string
}

func newAPIClient(cfg *Config) *apiClient {
	hc := &http.Client{Timeout: 10 * time.Second}
	return &apiClient{
		admin:    adminapi.Client{HTTP: hc, Token: cfg.AdminToken},
		node:     adminapi.Client{HTTP: hc, Token: cfg.AdminToken},
		adminURL: baseURL(cfg.Admin),
		nodeURL:  baseURL(cfg.NodeAPI),
	}
}

// do sends one request and returns the body of a 2xx response.
func (c *apiClient) do(ctx context.Context, a api, method, path, query string) ([]byte, error) {
	cl, base := &c.admin, c.adminURL
	if a == apiNode {
		cl, base = &c.node, c.nodeURL
	}
	u := base + path
	if query != "" {
		u += "?" + query
	}
	body, err := cl.Do(ctx, method, u, nil)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, u, err)
	}
	return body, nil
}

// apply runs a mode's HTTP steps in order.
func (c *apiClient) apply(ctx context.Context, m *mode) error {
	for _, s := range m.steps {
		if s.target != "" || s.tc != "" || s.proto != 0 {
			continue
		}
		if _, err := c.do(ctx, s.api, s.method, s.path, s.query); err != nil {
			return fmt.Errorf("mode %s: %w", m.name, err)
		}
	}
	return nil
}

// stateKey names one piece of restorable state: an API and the path that reads and
// writes it.
type stateKey struct {
	api  api
	path string
}

// savedState is what the modes touch, as it was before the first run: for each key, the
// query that puts it back.
type savedState struct {
	keys    []stateKey
	restore map[stateKey]string
	each    []*savedState // per sidecar of a cluster (see clusterAPI)
}

// snapshot reads the state that the modes' steps change. It returns notes for steps whose
// effect it cannot undo.
func (c *apiClient) snapshot(ctx context.Context, modes []*mode) (*savedState, []string, error) {
	st := &savedState{restore: map[stateKey]string{}}
	var notes []string
	add := func(k stateKey) error {
		if _, ok := st.restore[k]; ok {
			return nil
		}
		q, err := c.read(ctx, k)
		if err != nil {
			return err
		}
		st.restore[k] = q
		st.keys = append(st.keys, k)
		return nil
	}
	for _, m := range modes {
		for _, s := range m.steps {
			if s.target != "" || s.tc != "" || s.proto != 0 {
				continue
			}
			k := stateKey{s.api, s.path}
			switch {
			case s.path == pathSlowQuery || s.path == pathProbability || s.path == pathNodeProbability || s.path == pathGuardrail || s.path == pathStatementStats ||
				s.path == pathTraceContext || s.path == pathCapture || s.path == pathAudit || s.path == pathTraceFloor ||
				strings.HasPrefix(s.path, pathLoggers+"/") && len(s.path) > len(pathLoggers)+1:
				if err := add(k); err != nil {
					return nil, nil, err
				}
			case s.path == pathLoggers:
				body, err := c.do(ctx, s.api, http.MethodGet, pathLoggers, "")
				if err != nil {
					return nil, nil, fmt.Errorf("read logger names: %w", err)
				}
				names, err := adminapi.ParseLoggers(body)
				if err != nil {
					return nil, nil, fmt.Errorf("read logger names: %w", err)
				}
				for _, n := range names {
					if err := add(stateKey{s.api, pathLoggers + "/" + url.PathEscape(n)}); err != nil {
						return nil, nil, err
					}
				}
			default:
				notes = append(notes, fmt.Sprintf("mode %s: the state changed by %q is not restored after its runs (only slow_query, trace_probability and logger levels are)", m.name, s))
			}
		}
	}
	sort.Slice(st.keys, func(i, j int) bool {
		if st.keys[i].api != st.keys[j].api {
			return st.keys[i].api < st.keys[j].api
		}
		return st.keys[i].path < st.keys[j].path
	})
	return st, notes, nil
}

// read GETs one piece of state and returns the POST query that restores it exactly.
func (c *apiClient) read(ctx context.Context, k stateKey) (string, error) {
	body, err := c.do(ctx, k.api, http.MethodGet, k.path, "")
	if err != nil {
		return "", fmt.Errorf("read state: %w", err)
	}
	bad := func(err error) (string, error) {
		return "", fmt.Errorf("read state: GET %s on the %s API: %w", k.path, k.api, err)
	}
	switch {
	case k.path == pathSlowQuery:
		sq, err := adminapi.ParseSlowQuery(body)
		if err != nil {
			return bad(err)
		}
		return sq.Form().Encode(), nil
	case k.path == pathGuardrail:
		q, err := guardrailRestore(body)
		if err != nil {
			return bad(err)
		}
		return q, nil
	case k.path == pathStatementStats:
		var st struct {
			Enabled *bool `json:"enabled"`
		}
		if err := json.Unmarshal(body, &st); err != nil {
			return bad(err)
		}
		if st.Enabled == nil {
			return bad(errors.New("want enabled"))
		}
		return fmt.Sprintf("enable=%t", *st.Enabled), nil
	case k.path == pathTraceContext:
		var tc struct {
			Follow *bool `json:"follow_client_sampling"`
		}
		if err := json.Unmarshal(body, &tc); err != nil {
			return bad(err)
		}
		if tc.Follow == nil {
			return bad(errors.New("want follow_client_sampling"))
		}
		return fmt.Sprintf("follow_client_sampling=%t", *tc.Follow), nil
	case k.path == pathCapture:
		var cs struct {
			State string `json:"state"`
		}
		if err := json.Unmarshal(body, &cs); err != nil || cs.State == "" {
			return bad(fmt.Errorf("want a state: %s", body))
		}
		if cs.State != "off" {
			return bad(errors.New("a capture is running: loadcheck would stop it, so it does not start"))
		}
		return "enable=false", nil
	case k.path == pathAudit:
		return auditRestore(body)
	case k.path == pathTraceFloor:
		q, err := floorRestore(body)
		if err != nil {
			return bad(err)
		}
		return q, nil
	case k.path == pathProbability || k.path == pathNodeProbability:
		p, err := adminapi.ParseProbability(body)
		if err != nil {
			return bad(err)
		}
		return "probability=" + p, nil
	default: // a logger
		level, err := adminapi.ParseLevel(body)
		if err != nil {
			return bad(err)
		}
		return "level=" + url.QueryEscape(level), nil
	}
}

// restore puts every saved piece of state back. It tries them all and joins the errors.
func (c *apiClient) restore(ctx context.Context, st *savedState) error {
	if st == nil {
		return nil
	}
	var errs []error
	for _, k := range st.keys {
		if _, err := c.do(ctx, k.api, http.MethodPost, k.path, st.restore[k]); err != nil {
			errs = append(errs, fmt.Errorf("restore state: %w", err))
		}
	}
	return errors.Join(errs...)
}

// guardrailRestore returns the POST query that puts back the guardrail's budget of a GET
// /tracecar/guardrail body.
func guardrailRestore(body []byte) (string, error) {
	var g struct {
		Budget *struct {
			AddedP99 string      `json:"added_p99"`
			CPU      json.Number `json:"cpu_pct"`
			Drops    json.Number `json:"drops_per_s"`
			Window   string      `json:"window"`
			Cooldown string      `json:"cooldown"`
			Restore  bool        `json:"restore"`
		} `json:"budget"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&g); err != nil {
		return "", err
	}
	if g.Budget == nil {
		return "", errors.New("want a budget")
	}
	b := g.Budget
	or0 := func(s string) string {
		if s == "" {
			return "0"
		}
		return s
	}
	return url.Values{"added_p99": {or0(b.AddedP99)}, "cpu": {or0(b.CPU.String())}, "drops": {or0(b.Drops.String())},
		"window": {b.Window}, "cooldown": {b.Cooldown}, "restore": {strconv.FormatBool(b.Restore)}}.Encode(), nil
}

// floorRestore returns the POST query that puts back the trace floor of a GET
// /tracecar/trace_floor body.
func floorRestore(body []byte) (string, error) {
	var f adminapi.TraceFloor
	if err := json.Unmarshal(body, &f); err != nil || f.Interval == "" || f.MaxPerSecond < 1 {
		return "", fmt.Errorf("want the trace floor: %s", body)
	}
	interval := f.Interval
	if !f.Enabled {
		interval = "0"
	}
	return url.Values{"interval": {interval}, "max_per_second": {strconv.Itoa(f.MaxPerSecond)}}.Encode(), nil
}

// auditRestore returns the POST query that puts back the audit settings of a GET
// /tracecar/audit body.
func auditRestore(body []byte) (string, error) {
	var v struct {
		Enabled      *bool    `json:"enable"`
		Categories   []string `json:"categories"`
		Keyspaces    []string `json:"keyspaces"`
		Tables       []string `json:"tables"`
		ExcludeUsers []string `json:"exclude_users"`
	}
	if err := json.Unmarshal(body, &v); err != nil || v.Enabled == nil {
		return "", fmt.Errorf("read state: GET %s: want the audit settings: %s", pathAudit, body)
	}
	// An empty list is "*" (the API refuses an empty value); a keyspace or table name that
	// CQL would lower-case is quoted, so that it parses back as it is.
	list := func(names []string, quote bool) string {
		if len(names) == 0 {
			return "*"
		}
		out := make([]string, len(names))
		for i, n := range names {
			out[i] = n
			if quote {
				out[i] = quoteNames(n)
			}
		}
		return strings.Join(out, ",")
	}
	q := url.Values{"enable": {strconv.FormatBool(*v.Enabled)}, "keyspaces": {list(v.Keyspaces, true)},
		"tables": {list(v.Tables, true)}, "exclude_users": {list(v.ExcludeUsers, false)}}
	if len(v.Categories) > 0 {
		q.Set("categories", strings.Join(v.Categories, ","))
	}
	return q.Encode(), nil
}

// quoteNames quotes each dot-separated part of a keyspace or keyspace.table name that is
// not all lower-case letters, digits and underscores.
func quoteNames(name string) string {
	parts := strings.Split(name, ".")
	for i, p := range parts {
		if strings.ToLower(p) != p || strings.ContainsFunc(p, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_')
		}) {
			parts[i] = cql.QuoteName(p)
		}
	}
	return strings.Join(parts, ".")
}

// settingsOf works out a mode's effective settings from the saved initial state and the
// mode's steps; nil for a mode whose load bypasses the sidecar.
func settingsOf(m *mode, sidecar string, st *savedState) *ModeSettings {
	if sidecar == "" || m.target != sidecar {
		return nil
	}
	for st != nil && len(st.restore) == 0 && len(st.each) > 0 {
		st = st.each[0] // a cluster: every sidecar gets the same steps
	}
	q := url.Values{}
	if st != nil {
		for _, k := range []stateKey{{apiAdmin, pathSlowQuery}, {apiAdmin, pathProbability}} {
			if v, err := url.ParseQuery(st.restore[k]); err == nil {
				for name, vs := range v {
					q[name] = vs
				}
			}
		}
	}
	for _, s := range m.steps {
		if s.api != apiAdmin || s.method != "POST" || s.path != pathSlowQuery && s.path != pathProbability {
			continue
		}
		if v, err := url.ParseQuery(s.query); err == nil {
			for name, vs := range v {
				q[name] = vs
			}
		}
	}
	out := &ModeSettings{Probability: q.Get("probability")}
	if v, err := strconv.ParseBool(q.Get("enable")); err == nil {
		out.Enable = &v
	}
	if v, err := strconv.ParseBool(q.Get("fast")); err == nil {
		out.Fast = &v
	}
	if v, err := strconv.ParseInt(strings.TrimSpace(q.Get("threshold")), 10, 64); err == nil {
		out.ThresholdUs = &v
	}
	return out
}
