package auth

import (
	"slices"
	"sort"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/grammar"
)

// LIST ROLES, LIST USERS and LIST PERMISSIONS, with the columns of Cassandra's results.

func authSpec(table, name string, t cql.TypeInfo) cql.ColumnSpec {
	return cql.ColumnSpec{Keyspace: "system_auth", Table: table, Name: name, Type: t}
}

// ListRoles runs LIST ROLES or LIST USERS by role user, which has logged in.
func (a *Roles) ListRoles(user string, st *grammar.ListRolesStmt) (cql.Message, error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	text, boolean := cql.TypeInfo{ID: cql.TypeVarchar}, cql.TypeInfo{ID: cql.TypeBoolean}
	var roles []*role
	describeAll := a.has(user, "DESCRIBE", grammar.Resource{Kind: grammar.ResAllRoles})
	switch {
	case st.Of != "":
		if a.roles[st.Of] == nil {
			return nil, cqlvalue.Invalidf("%s doesn't exist", st.Of)
		}
		if !describeAll && !a.grantedTo(user, st.Of) {
			return nil, Unauthorized("You are not authorized to view roles granted to %s ", st.Of)
		}
		roles = a.rolesOf(st.Of, !st.Norecursive)
	case describeAll:
		for _, r := range a.roles {
			roles = append(roles, r)
		}
	default:
		roles = a.rolesOf(user, true)
	}
	sort.Slice(roles, func(i, j int) bool { return roles[i].name < roles[j].name })
	dcs := func(*role) []byte { return cqlvalue.EncText("ALL") } // AllowAllNetworkAuthorizer
	var rows [][][]byte
	if st.Users {
		specs := []cql.ColumnSpec{authSpec("users", "name", text), authSpec("users", "super", boolean), authSpec("users", "datacenters", text)}
		for _, r := range roles {
			if r.login {
				rows = append(rows, [][]byte{cqlvalue.EncText(r.name), cqlvalue.EncBool(a.isSuper(r.name)), dcs(r)})
			}
		}
		return cql.RowsResult{Metadata: cql.RowsMetadata{Columns: specs, ColumnCount: len(specs)}, Rows: rows}, nil
	}
	specs := []cql.ColumnSpec{authSpec("roles", "role", text), authSpec("roles", "super", boolean),
		authSpec("roles", "login", boolean), authSpec("roles", "options", cql.MapOf(text, text)), authSpec("roles", "datacenters", text)}
	for _, r := range roles {
		rows = append(rows, [][]byte{cqlvalue.EncText(r.name), cqlvalue.EncBool(r.super), cqlvalue.EncBool(r.login), cqlvalue.EncTextMap(nil), dcs(r)})
	}
	return cql.RowsResult{Metadata: cql.RowsMetadata{Columns: specs, ColumnCount: len(specs)}, Rows: rows}, nil
}

// ListPermissions runs LIST PERMISSIONS by role user, which has logged in; schema resolves
// the resource it names, if it names one.
func (a *Roles) ListPermissions(user string, st *grammar.ListPermsStmt, schema Schema) (cql.Message, error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if st.Of != "" && a.roles[st.Of] == nil {
		return nil, cqlvalue.Invalidf("%s doesn't exist", st.Of)
	}
	var res *grammar.Resource
	if st.Res != nil {
		r, err := a.resolve(*st.Res, schema)
		if err != nil {
			return nil, err
		}
		res = &r
	}
	if !a.has(user, "DESCRIBE", grammar.Resource{Kind: grammar.ResAllRoles}) {
		if st.Of == "" {
			return nil, Unauthorized("You are not authorized to view everyone's permissions")
		}
		if !a.grantedTo(user, st.Of) {
			return nil, Unauthorized("You are not authorized to view %s's permissions", st.Of)
		}
	}
	text := cql.TypeInfo{ID: cql.TypeVarchar}
	specs := []cql.ColumnSpec{authSpec("permissions", "role", text), authSpec("permissions", "username", text),
		authSpec("permissions", "resource", text), authSpec("permissions", "permission", text)}
	var rows [][][]byte
	for _, d := range a.permissionsOf(a.listedRoles(st), res, st.Perms) {
		rows = append(rows, [][]byte{cqlvalue.EncText(d.role), cqlvalue.EncText(d.role), cqlvalue.EncText(d.res.String()), cqlvalue.EncText(grammar.PermissionNames[d.perm])})
	}
	return cql.RowsResult{Metadata: cql.RowsMetadata{Columns: specs, ColumnCount: len(specs)}, Rows: rows}, nil
}

// listedRoles are the roles whose permissions LIST PERMISSIONS lists: those of OF's role,
// with those granted to it unless NORECURSIVE, or every role's. The caller holds a.mu.
func (a *Roles) listedRoles(st *grammar.ListPermsStmt) []*role {
	switch {
	case st.Of != "" && st.Norecursive:
		return []*role{a.roles[st.Of]} // its own permissions, none it inherits
	case st.Of != "":
		return a.rolesOf(st.Of, true)
	}
	var roles []*role
	for _, r := range a.roles {
		roles = append(roles, r)
	}
	return roles
}

// permission is a row of LIST PERMISSIONS: a role's permission on a resource.
type permission struct {
	role, key string
	res       grammar.Resource
	perm      int // in grammar.PermissionNames
}

// permissionsOf returns the permissions of roles among perms (all when nil) on res and its
// parents (on every resource when nil), by role, resource and permission. The caller holds
// a.mu.
func (a *Roles) permissionsOf(roles []*role, res *grammar.Resource, perms []string) []permission {
	// The resources asked about: one and its parents, or all of them.
	onChain := func(key string) bool {
		if res == nil {
			return true
		}
		for r, ok := *res, true; ok; r, ok = r.Parent() {
			if r.Key() == key {
				return true
			}
		}
		return false
	}
	var out []permission
	for _, r := range roles {
		for key, ps := range r.permissions {
			if !onChain(key) {
				continue
			}
			for _, p := range ps {
				if perms == nil || slices.Contains(perms, p) {
					out = append(out, permission{r.name, key, r.resources[key], slices.Index(grammar.PermissionNames, p)})
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.role != b.role {
			return a.role < b.role
		}
		if a.key != b.key {
			return a.key < b.key
		}
		return a.perm < b.perm
	})
	return out
}
