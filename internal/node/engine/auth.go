package engine

import (
	"github.com/tracecar/tracecar/internal/node/auth"
	"github.com/tracecar/tracecar/internal/node/grammar"
	"github.com/tracecar/tracecar/internal/node/storage"
)

// The engine's side of roles and permissions (internal/node/auth): the permissions its
// statements need, checked before they run (a schema statement checks its own as it runs,
// in schemachange.go); the system_auth tables. The role statements, and the resources of
// the schema they name, are auth_statements.go's. Without EngineConfig.Auth the engine has
// no roles (auth.Roles.Enabled).

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
