package loadcheck

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// A cluster is measured through one sidecar per node: Config.Admin lists every sidecar's
// admin API, each mode's steps go to all of them (and the state they change is saved and
// restored on each), the load spreads over the sidecars by gocql's token-aware policy, and
// the report counts the requests each sidecar saw in each run, from its /metrics.

// stateAPI is what the checker needs from the admin APIs: one sidecar's (apiClient) or
// every sidecar's of a cluster (clusterAPI).
type stateAPI interface {
	apply(ctx context.Context, m *mode) error
	snapshot(ctx context.Context, modes []*mode) (*savedState, []string, error)
	restore(ctx context.Context, st *savedState) error
	// requests returns the requests each sidecar has counted, or nil for one sidecar.
	requests(ctx context.Context) ([]uint64, error)
	// scrape reads one process's /metrics at url.
	scrape(ctx context.Context, url string, a api) (sample, error)
}

func newStateAPI(cfg *Config) stateAPI {
	admins := cfg.admins()
	if len(admins) <= 1 {
		return newAPIClient(cfg)
	}
	ca := &clusterAPI{}
	for _, a := range admins {
		one := *cfg
		one.Admin = a
		ca.each = append(ca.each, newAPIClient(&one))
	}
	return ca
}

// requests is nil for one sidecar: its figures are the run's own.
func (c *apiClient) requests(context.Context) ([]uint64, error) { return nil, nil }

// clusterAPI applies every step to every sidecar, the node API steps once.
type clusterAPI struct {
	each []*apiClient
}

func (ca *clusterAPI) scrape(ctx context.Context, url string, a api) (sample, error) {
	return ca.each[0].scrape(ctx, url, a)
}

func (ca *clusterAPI) apply(ctx context.Context, m *mode) error {
	for _, c := range ca.each {
		for _, s := range m.steps {
			if s.target != "" || s.tc != "" || s.proto != 0 || s.api == apiNode && c != ca.each[0] {
				continue
			}
			if _, err := c.do(ctx, s.api, s.method, s.path, s.query); err != nil {
				return fmt.Errorf("mode %s: sidecar %s refused: %w", m.name, c.adminURL, err)
			}
		}
	}
	return nil
}

func (ca *clusterAPI) snapshot(ctx context.Context, modes []*mode) (*savedState, []string, error) {
	st := &savedState{}
	var notes []string
	for i, c := range ca.each {
		one, n, err := c.snapshot(ctx, modes)
		if err != nil {
			return nil, nil, fmt.Errorf("sidecar %s: %w", c.adminURL, err)
		}
		if i == 0 {
			notes = n
		} else {
			// The node API is shared: only the first sidecar's client restores it.
			one = withoutNodeAPI(one)
		}
		st.each = append(st.each, one)
	}
	return st, notes, nil
}

func withoutNodeAPI(st *savedState) *savedState {
	out := &savedState{restore: st.restore}
	for _, k := range st.keys {
		if k.api != apiNode {
			out.keys = append(out.keys, k)
		}
	}
	return out
}

func (ca *clusterAPI) restore(ctx context.Context, st *savedState) error {
	if st == nil {
		return nil
	}
	var errs []error
	for i, one := range st.each {
		if err := ca.each[i].restore(ctx, one); err != nil {
			errs = append(errs, fmt.Errorf("sidecar %s: %w", ca.each[i].adminURL, err))
		}
	}
	return errors.Join(errs...)
}

// requests reads tracecar_requests_total, summed over opcodes, from each sidecar.
func (ca *clusterAPI) requests(ctx context.Context) ([]uint64, error) {
	out := make([]uint64, len(ca.each))
	for i, c := range ca.each {
		body, err := c.do(ctx, apiAdmin, http.MethodGet, "/metrics", "")
		if err != nil {
			return nil, err
		}
		if out[i], err = sumCounter(body, "tracecar_requests_total"); err != nil {
			return nil, fmt.Errorf("GET %s/metrics: %w", c.adminURL, err)
		}
	}
	return out, nil
}

// sumCounter sums the samples of the counter name in a Prometheus text exposition.
func sumCounter(body []byte, name string) (uint64, error) {
	var sum float64
	found := false
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || rest[0] != '{' && rest[0] != ' ' {
			continue
		}
		f := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return 0, fmt.Errorf("bad sample %q", line)
		}
		sum += v
		found = true
	}
	if !found {
		return 0, fmt.Errorf("no %s series", name)
	}
	return uint64(sum), nil
}

// sidecarDelta returns the requests each sidecar saw between two reads.
func sidecarDelta(admins []string, before, after []uint64) []SidecarRequests {
	if before == nil || after == nil {
		return nil
	}
	out := make([]SidecarRequests, len(admins))
	for i := range admins {
		out[i] = SidecarRequests{Admin: admins[i], Requests: after[i] - before[i]}
	}
	return out
}
