package ctl

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tracecar/tracecar/admin/adminapi"
)

// showCapture describes a capture's status in one line: the running capture's file and
// counters, or how the last one ended.
func showCapture(body []byte) (string, error) {
	var st adminapi.Capture
	if err := json.Unmarshal(body, &st); err != nil {
		return "", fmt.Errorf("bad capture response %q: %w", body, err)
	}
	var b strings.Builder
	if st.State == "capturing" {
		fmt.Fprintf(&b, "capturing file=%s values=%s records=%d bytes=%d dropped=%d", st.File, st.Values, st.Records, st.Bytes, st.Dropped)
		if st.Warning != "" {
			b.WriteString(" WARNING: " + st.Warning)
		}
		return b.String(), nil
	}
	b.WriteString("off")
	if st.Dir == "" {
		b.WriteString(" (no --capture-dir)")
	}
	if l := st.Last; l != nil {
		if l.Error != "" {
			fmt.Fprintf(&b, "; last capture failed: %s", l.Error)
		} else {
			fmt.Fprintf(&b, "; last file=%s values=%s records=%d bytes=%d dropped=%d ended=%s", l.File, l.Values, l.Records, l.Bytes, l.Dropped, l.Reason)
		}
	}
	return b.String(), nil
}
