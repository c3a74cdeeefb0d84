package ctl

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

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
