package main

import (
	"flag"
	"strings"
	"time"

	"github.com/tracecar/tracecar/audit"
)

// The audit log's flags: the sidecar's --audit-* flags and what they say, checked (the Log
// they build is auditlog.go's; `tracecar ctl audit` is ctl.go's).

// auditConfig is what the --audit-* flags say: the sinks, the policy and the settings the
// sidecar starts with (a handover's inherited settings win over them).
type auditConfig struct {
	Dir      string        // --audit-dir: JSON lines there; "" no file sink
	Syslog   string        // --audit-syslog: an RFC 5424 target; "" no syslog sink
	Table    bool          // --audit-table: ScyllaDB's audit.audit_log in the node
	Policy   string        // block or drop
	Fsync    time.Duration // the file sink's fsync interval
	MaxSize  *byteSize     // a file's size before it is rotated
	MaxFiles int           // files kept in Dir, the current one included
	Queue    int           // records held per sink before the policy applies
	Enable   bool          // audit from the start when there is a sink
	// The settings at start, as the API's parameters spell them.
	Categories, Keyspaces, Tables, ExcludeUsers string

	policy   audit.Policy       // checked Policy
	settings audit.Settings     // checked settings
	syslog   audit.SyslogTarget // checked Syslog
}

// addAuditFlags defines the flags of the audit log.
func addAuditFlags(fs *flag.FlagSet, a *auditConfig) {
	fs.StringVar(&a.Dir, "audit-dir", "", "`DIR` for the audit log as JSON lines, created with mode 0700, files 0600; empty: no file sink")
	fs.StringVar(&a.Syslog, "audit-syslog", "", "`TARGET` for the audit log as RFC 5424 syslog messages: unix:///dev/log, unixgram:///PATH, unixstream:///PATH, udp://HOST:PORT or tcp://HOST:PORT (octet counting), optionally ?facility=NAME (default authpriv); empty: no syslog sink")
	fs.BoolVar(&a.Table, "audit-table", false, "write the audit log into the node's audit.audit_log table (ScyllaDB's schema, plus error_code and batch_id), created if absent, over the sidecar's node session")
	fs.StringVar(&a.Policy, "audit-policy", "block", "what a sink that falls behind or fails does: block (requests wait on the bounded queue, as Cassandra's audit block: true) or drop (requests never wait; each dropped record is counted)")
	fs.DurationVar(&a.Fsync, "audit-fsync", time.Second, "how often the audit file is fsynced (also at rotation and stop): a record is on disk at most this long after it was written")
	a.MaxSize = &byteSize{n: audit.DefaultMaxFileSize, min: 64 << 10, max: 1 << 40}
	fs.Var(a.MaxSize, "audit-max-file-size", "an audit file's `size` before it is rotated, such as 100MiB")
	fs.IntVar(&a.MaxFiles, "audit-max-files", audit.DefaultMaxFiles, "audit files kept in --audit-dir, the current one included; the oldest are removed")
	fs.IntVar(&a.Queue, "audit-queue", audit.DefaultQueue, "audit records held in memory per sink before --audit-policy applies")
	fs.BoolVar(&a.Enable, "audit-enable", true, "audit from the start when a sink is given (--audit-dir, --audit-syslog, --audit-table); false starts with the audit off, for POST /tracecar/audit?enable=true")
	fs.StringVar(&a.Categories, "audit-categories", audit.DefaultCategories, "audited categories, comma-separated: AUTH, DDL, DCL, DML, QUERY, ADMIN (as ScyllaDB's audit_categories)")
	fs.StringVar(&a.Keyspaces, "audit-keyspaces", "", "audit DDL, DML and QUERY in these keyspaces only, comma-separated; empty: every keyspace")
	fs.StringVar(&a.Tables, "audit-tables", "", "audit DDL, DML and QUERY on these tables only, as keyspace.table, comma-separated; empty: every table")
	fs.StringVar(&a.ExcludeUsers, "audit-exclude-users", "", "users never audited, comma-separated")
}

// check checks the flags into a.policy and a.settings.
func (a *auditConfig) check() error {
	var err error
	if a.policy, err = audit.ParsePolicy(a.Policy); err != nil {
		return usageErrorf("--audit-policy: %v", err)
	}
	if a.Fsync <= 0 {
		return usageErrorf("--audit-fsync must be a positive duration such as 1s, got %v", a.Fsync)
	}
	if a.MaxFiles < 1 {
		return usageErrorf("--audit-max-files must be 1 or more, got %d", a.MaxFiles)
	}
	if a.Queue < 1 {
		return usageErrorf("--audit-queue must be 1 or more records, got %d", a.Queue)
	}
	p := map[string]string{"categories": a.Categories, "keyspaces": a.Keyspaces, "tables": a.Tables, "exclude_users": a.ExcludeUsers}
	s, err := audit.ParseSettings(audit.Settings{}, p)
	if err != nil {
		return usageErrorf("--audit-%v", strings.Replace(err.Error(), "exclude_users", "exclude-users", 1))
	}
	if a.Syslog != "" {
		if a.syslog, err = audit.ParseSyslogTarget(a.Syslog); err != nil {
			return usageErrorf("--audit-syslog: %v", err)
		}
	}
	s.Enabled = a.Enable && (a.Dir != "" || a.Syslog != "" || a.Table)
	a.settings = s
	return nil
}
