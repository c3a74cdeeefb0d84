package engine

import (
	"strings"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/auth"
	"github.com/tracecar/tracecar/internal/node/grammar"
	"github.com/tracecar/tracecar/internal/node/storage"
)

// The role and permission statements (internal/node/auth runs them), with the schema
// still, and the resources of the schema they name. They sit above the schema's statements,
// whose types a function resource is resolved with (resolveArgs); the permissions are
// auth.go's.

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
