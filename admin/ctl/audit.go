package ctl

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tracecar/tracecar/admin/adminapi"
)

// showAudit describes the audit log in one line: on or off, what it audits, the policy,
// the records, the drops, and each sink's state, with why it fails.
func showAudit(body []byte) (string, error) {
	var st adminapi.Audit
	if err := json.Unmarshal(body, &st); err != nil {
		return "", fmt.Errorf("bad audit response %q: %w", body, err)
	}
	return auditLine(st), nil
}

// auditLine is showAudit's line, also the audit part of the status line.
func auditLine(st adminapi.Audit) string {
	var b strings.Builder
	if st.Enabled {
		b.WriteString("on")
	} else {
		b.WriteString("off")
	}
	list := func(name string, v []string, none string) {
		if len(v) == 0 {
			fmt.Fprintf(&b, " %s=%s", name, none)
		} else {
			fmt.Fprintf(&b, " %s=%s", name, strings.Join(v, ","))
		}
	}
	list("categories", st.Categories, "-")
	list("keyspaces", st.Keyspaces, "*")
	list("tables", st.Tables, "*")
	list("exclude_users", st.ExcludeUsers, "-")
	var records uint64
	for _, n := range st.Records {
		records += n
	}
	fmt.Fprintf(&b, " policy=%s records=%d dropped=%d", st.Policy, records, st.Dropped)
	if len(st.Sinks) == 0 {
		b.WriteString(" sinks=none")
	}
	for _, s := range st.Sinks {
		fmt.Fprintf(&b, " %s=%s", s.Name, s.State)
		if s.Error != "" {
			fmt.Fprintf(&b, " (%s)", s.Error)
		}
	}
	return b.String()
}
