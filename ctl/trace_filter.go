package ctl

import (
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
)

// traceFilter builds "ctl trace-filter": with filter flags, POST them; with --clear,
// DELETE the filter; then show it.
func traceFilter(c *common, args []string) (op, error) {
	fs := newFlagSet("trace-filter")
	c.register(fs)
	names := []string{"keyspace", "table", "user", "client", "statement", "opcode"}
	vals := map[string]*string{}
	for _, n := range names {
		vals[n] = fs.String(n, "", "trace only requests with this "+n)
	}
	clear := fs.Bool("clear", false, "remove the filter: trace every request again")
	if err := parseFlags(fs, args); err != nil {
		return op{}, err
	}
	if fs.NArg() > 0 {
		return op{}, usageErr("trace-filter takes flags only, got %q", fs.Args())
	}
	params := url.Values{}
	for _, n := range names {
		if v := *vals[n]; v != "" {
			params.Set(n, v)
		}
	}
	o := op{get: "/tracecar/trace_filter", show: showTraceFilter}
	switch {
	case *clear && len(params) > 0:
		return op{}, usageErr("--clear takes no filter flags")
	case *clear:
		o.del = "/tracecar/trace_filter"
	case len(params) > 0:
		o.post, o.params = "/tracecar/trace_filter", params
	}
	return o, nil
}

func showTraceFilter(body []byte) (string, error) {
	var f map[string]string
	if err := json.Unmarshal(body, &f); err != nil {
		return "", fmt.Errorf("bad trace_filter response %q: %w", body, err)
	}
	if len(f) == 0 {
		return "no filter: every request is traced", nil
	}
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + f[k]
	}
	return strings.Join(parts, " "), nil
}
