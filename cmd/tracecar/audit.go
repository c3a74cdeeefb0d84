package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tracecar/tracecar/admin/ctl"
	"github.com/tracecar/tracecar/audit"
	"github.com/tracecar/tracecar/internal/logs"
)

// The audit log: the sidecar's --audit-* flags, the Log they build and its sinks.

// auditConfig is what the --audit-* flags say: the sinks, the policy and the settings the
// sidecar starts with (a handover's inherited settings win over them).
type auditConfig struct {
	Dir      string        // --audit-dir: JSON lines there; "" no file sink
	Policy   string        // block or drop
	Fsync    time.Duration // the file sink's fsync interval
	MaxSize  *byteSize     // a file's size before it is rotated
	MaxFiles int           // files kept in Dir, the current one included
	Queue    int           // records held per sink before the policy applies
	Enable   bool          // audit from the start when there is a sink
	// The settings at start, as the API's parameters spell them.
	Categories, Keyspaces, Tables, ExcludeUsers string

	policy   audit.Policy   // checked Policy
	settings audit.Settings // checked settings
}

// addAuditFlags defines the flags of the audit log.
func addAuditFlags(fs *flag.FlagSet, a *auditConfig) {
	fs.StringVar(&a.Dir, "audit-dir", "", "`DIR` for the audit log as JSON lines, created with mode 0700, files 0600; empty: no file sink")
	fs.StringVar(&a.Policy, "audit-policy", "block", "what a sink that falls behind or fails does: block (requests wait on the bounded queue, as Cassandra's audit block: true) or drop (requests never wait; each dropped record is counted)")
	fs.DurationVar(&a.Fsync, "audit-fsync", time.Second, "how often the audit file is fsynced (also at rotation and stop): a record is on disk at most this long after it was written")
	a.MaxSize = &byteSize{n: audit.DefaultMaxFileSize, min: 64 << 10, max: 1 << 40}
	fs.Var(a.MaxSize, "audit-max-file-size", "an audit file's `size` before it is rotated, such as 100MiB")
	fs.IntVar(&a.MaxFiles, "audit-max-files", audit.DefaultMaxFiles, "audit files kept in --audit-dir, the current one included; the oldest are removed")
	fs.IntVar(&a.Queue, "audit-queue", audit.DefaultQueue, "audit records held in memory per sink before --audit-policy applies")
	fs.BoolVar(&a.Enable, "audit-enable", true, "audit from the start when a sink is given (--audit-dir); false starts with the audit off, for POST /tracecar/audit?enable=true")
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
	s.Enabled = a.Enable && a.Dir != ""
	a.settings = s
	return nil
}

// newAudit builds the audit log and its sinks. Its closer, which writes what is queued and
// syncs the sinks, joins the front of the stack's closers: it runs once the proxy has
// drained, so that the last requests' records are in.
func (st *stack) newAudit(cfg stackConfig) error {
	a := cfg.Audit
	var sinks []audit.Sink
	if a.Dir != "" {
		f, err := audit.NewFile(audit.FileConfig{Dir: a.Dir, MaxSize: int64(a.MaxSize.n), MaxFiles: a.MaxFiles})
		if err != nil {
			return fmt.Errorf("--audit-dir %s: %w", a.Dir, err)
		}
		sinks = append(sinks, f)
	}
	st.audit = audit.Open(audit.Config{Policy: a.policy, Queue: a.Queue, Sync: a.Fsync, Node: st.Node,
		Sinks: sinks, Logger: st.reg.Logger(logs.Admin)})
	st.audit.Set(a.settings)
	st.closers = append([]func(context.Context) error{st.closeAudit}, st.closers...)
	return nil
}

// auditCloseTimeout bounds how long the stop waits for an audit sink that still fails,
// so that the closers after it (the tracer's sinks, the node session) keep their time.
const auditCloseTimeout = 5 * time.Second

// closeAudit writes what the audit log holds and syncs its sinks; a sink still failing
// after auditCloseTimeout loses what it holds, counted as dropped and said in the error.
func (st *stack) closeAudit(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, auditCloseTimeout)
	defer cancel()
	err := st.audit.Close(ctx)
	if n := st.audit.Dropped(); n > 0 {
		st.reg.Logger(logs.Admin).Error().Uint64("dropped", n).Err(st.audit.Err()).
			Msg("audit log closed: records were dropped since start")
	}
	return err
}

// ctlAudit parses "tracecar ctl audit": with no flags it shows each host's audit log; with
// flags it changes what they name on every host. The values are checked here first, so
// that a typo is a usage error before any host is asked.
func ctlAudit(c *common, args []string) (ctl.Command, error) {
	fs := ctlFlagSet("audit")
	c.register(fs)
	enable := fs.Bool("enable", false, "turn the audit log on")
	disable := fs.Bool("disable", false, "turn the audit log off (itself recorded)")
	lists := map[string]*string{}
	for _, p := range []struct{ flag, param, usage string }{
		{"categories", "categories", "audited categories, comma-separated: AUTH, DDL, DCL, DML, QUERY, ADMIN"},
		{"keyspaces", "keyspaces", "keyspaces audited (DDL, DML, QUERY), comma-separated; * for all"},
		{"tables", "tables", "keyspace.table names audited, comma-separated; * for all"},
		{"exclude-users", "exclude_users", "users never audited, comma-separated; * for none"},
	} {
		lists[p.param] = fs.String(p.flag, "", p.usage)
	}
	if err := parseCtlArgs(fs, args); err != nil {
		return ctl.Command{}, err
	}
	if fs.NArg() > 0 {
		return ctl.Command{}, usageErrorf("audit takes only flags, got %q", fs.Args())
	}
	if *enable && *disable {
		return ctl.Command{}, usageErrorf("audit: --enable and --disable contradict each other")
	}
	p := url.Values{}
	if *enable || *disable {
		p.Set("enable", strconv.FormatBool(*enable))
	}
	for name, v := range lists {
		if *v != "" {
			p.Set(name, *v)
		}
	}
	cmd := ctl.Command{Name: ctl.Audit}
	if len(p) == 0 {
		return cmd, nil
	}
	check := map[string]string{}
	for k := range p {
		check[k] = p.Get(k)
	}
	if _, err := audit.ParseSettings(audit.Settings{}, check); err != nil {
		return ctl.Command{}, usageErrorf("audit: --%s", strings.Replace(err.Error(), "exclude_users", "exclude-users", 1))
	}
	cmd.Change = p
	return cmd, nil
}
