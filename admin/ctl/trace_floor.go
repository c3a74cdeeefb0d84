package ctl

import (
	"encoding/json"
	"fmt"

	"github.com/tracecar/tracecar/admin/adminapi"
)

func showTraceFloor(body []byte) (string, error) {
	var f adminapi.TraceFloor
	if err := json.Unmarshal(body, &f); err != nil {
		return "", fmt.Errorf("bad trace_floor response %q: %w", body, err)
	}
	if !f.Enabled {
		return "trace floor off", nil
	}
	return fmt.Sprintf("interval=%s max_per_second=%d", f.Interval, f.MaxPerSecond), nil
}
