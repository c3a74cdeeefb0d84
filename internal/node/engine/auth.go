package engine

import (
	"strings"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/auth"
	"github.com/tracecar/tracecar/internal/node/grammar"
	"github.com/tracecar/tracecar/internal/node/storage"
)

// The engine's side of roles and permissions (internal/node/auth): the permissions its
// statements need, checked before they run; the role statements, run with the schema
// still; the resources of the schema they name; the system_auth tables. Without
// EngineConfig.Auth the engine has no roles (auth.Roles.Enabled).

// Login checks a login and returns the role's name. It is safe for concurrent use.
func (e *Engine) Login(user, password string) (string, error) { return e.auth.Login(user, password) }

// authorize checks that the session's role holds the permissions a statement needs.
func (e *Engine) authorize(s *Session, needs []need) error {
	user := ""
	if s != nil {
		user = s.User
	}
	return e.auth.Authorize(user, needs)
}

// tableNeeds records that the statement needs perm on table t: SELECT or MODIFY. Schema
// statements check theirs when they run (ddl.require).
func (c *compiler) tableNeeds(t *storage.Table, perm string) {
	if perm == "SELECT" && auth.ReadableByAll(t.Ks) {
		return
	}
	c.needs = append(c.needs, need{Perm: perm, Res: grammar.Resource{Kind: grammar.ResTable, Ks: t.Ks, Name: t.Name}})
}

// authPlan runs a role or permission statement.
type authPlan struct{ st grammar.Statement }

func (p *authPlan) exec(e *Engine, x *execCtx) (cql.Message, error) {
	if !e.auth.Enabled() || x.s == nil || x.s.User == "" {
		return nil, auth.Unauthorized("You have to be logged in and not anonymous to perform this request")
	}
	user, schema := x.s.User, e.resourceResolver(x.s)
	switch st := p.st.(type) {
	case *grammar.ListRolesStmt:
		return e.auth.ListRoles(user, st)
	case *grammar.ListPermsStmt:
		return e.auth.ListPermissions(user, st, schema)
	}
	e.ddlMu.Lock() // with schema changes, so that GRANT sees the resources that exist
	defer e.ddlMu.Unlock()
	if err := e.auth.Change(user, p.st, schema); err != nil {
		return nil, err
	}
	e.refreshAuth()
	return cql.VoidResult{}, nil
}

// resourceResolver completes and checks, for session s, a resource of the schema that
// GRANT, REVOKE or LIST PERMISSIONS names (auth.Schema).
func (e *Engine) resourceResolver(s *Session) auth.Schema {
	return func(r grammar.Resource) (grammar.Resource, error) {
		if (r.Kind == grammar.ResTable || r.Kind == grammar.ResFunction) && r.Ks == "" {
			if s.Keyspace == "" {
				return r, invalidf("No keyspace has been specified. USE a keyspace, or explicitly specify keyspace.tablename")
			}
			r.Ks = s.Keyspace
		}
		sc := e.schema.Load()
		if r.Kind == grammar.ResFunction {
			k := sc.Keyspaces[r.Ks]
			if k == nil {
				return r, invalidf("Resource %s doesn't exist", r)
			}
			args, err := resolveArgs(k.Resolver(), r.Args)
			if err != nil {
				return r, err
			}
			r.ArgText = storage.TypeTexts(args)
		}
		if !inSchema(sc, r) {
			return r, invalidf("Resource %s doesn't exist", r)
		}
		return r, nil
	}
}

// inSchema reports whether a keyspace, table or function resource is in schema sc; other
// resources are.
func inSchema(sc *storage.Schema, r grammar.Resource) bool {
	switch r.Kind {
	case grammar.ResKeyspace, grammar.ResKeyspaceFunctions:
		return sc.Keyspaces[r.Ks] != nil
	case grammar.ResTable:
		return sc.Table(r.Ks, r.Name) != nil
	case grammar.ResFunction:
		k := sc.Keyspaces[r.Ks]
		return k != nil && (k.Functions[r.Name+"("+strings.Join(r.ArgText, ", ")+")"] != nil || k.Aggregates[r.Name+"("+strings.Join(r.ArgText, ", ")+")"] != nil)
	}
	return true
}

// refreshAuth rewrites the system_auth tables from the roles.
func (e *Engine) refreshAuth() {
	sc := e.schema.Load()
	now := e.cfg.Now()
	ws := make(map[string]*rowWriter, len(auth.SystemTables))
	for _, name := range auth.SystemTables {
		ws[name] = &rowWriter{t: sc.Table("system_auth", name), d: storage.NewTableData(), ts: now.UnixMicro(), now: now.Unix()}
	}
	e.auth.SystemRows(func(table string, row map[string][]byte) { ws[table].put(row) })
	for _, name := range auth.SystemTables {
		ws[name].t.Data.Store(ws[name].d)
	}
}

// require checks, when the engine has roles, that the session's role holds perm on res.
func (d *ddl) require(perm string, res grammar.Resource) error {
	if !d.e.auth.Enabled() {
		return nil
	}
	return d.e.authorize(d.x.s, []need{{Perm: perm, Res: res}})
}

// created grants the creator of res every permission on it, and dropped forgets the
// permissions on res, once the schema change is published.
func (d *ddl) created(res grammar.Resource) {
	if d.e.auth.Enabled() && d.x.s != nil {
		user := d.x.s.User
		d.after = append(d.after, func() { d.e.auth.GrantCreator(user, res) })
	}
}

func (d *ddl) dropped(res grammar.Resource) {
	if d.e.auth.Enabled() {
		d.after = append(d.after, func() { d.e.auth.Forget(res) })
	}
}
