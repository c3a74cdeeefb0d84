package auth

import (
	"slices"
	"strings"

	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/grammar"
)

// Role and permission statements that change the roles: CREATE, ALTER and DROP ROLE (or
// USER), GRANT and REVOKE of permissions and of roles.

// Schema completes and checks a resource of GRANT, REVOKE or LIST PERMISSIONS that is in
// the schema (a keyspace, table or function): its keyspace when it names none, a function's
// argument types; one that does not exist is an error. Other resources pass as they are.
// It must not call Roles, whose lock is held.
type Schema func(grammar.Resource) (grammar.Resource, error)

// Change runs a statement that changes the roles, by role user, which has logged in; the
// caller keeps the schema from changing meanwhile, so that GRANT sees the resources that
// exist.
func (a *Roles) Change(user string, st grammar.Statement, schema Schema) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch st := st.(type) {
	case *grammar.RoleStmt:
		if err := roleOptions(st); err != nil {
			return err
		}
		switch st.Op {
		case grammar.RoleCreate:
			return a.createRole(user, st)
		case grammar.RoleAlter:
			return a.alterRole(user, st)
		}
		return a.dropRole(user, st)
	case *grammar.GrantStmt:
		return a.grantPermissions(user, st, schema)
	case *grammar.GrantRoleStmt:
		return a.grantRole(user, st)
	}
	return nil
}

// roleOptions refuses the options of CREATE or ALTER ROLE that the node does not have.
func roleOptions(st *grammar.RoleStmt) error {
	o := st.Opts
	if o.Hashed {
		return cqlvalue.Invalidf("HASHED PASSWORD is not supported by the embedded node: it keeps its own hashes, not bcrypt ones")
	}
	if o.Options {
		return cqlvalue.Invalidf("org.apache.cassandra.auth.CassandraRoleManager doesn't support OPTIONS")
	}
	if o.Dcs != nil || o.AllDCs {
		// Cassandra's default network_authorizer, which the node is like: every role may
		// log in from every data center.
		return cqlvalue.Invalidf("ACCESS TO DATACENTERS operations not supported by AllowAllNetworkAuthorizer")
	}
	return nil
}

// setOptions sets the login, superuser status and password that CREATE or ALTER ROLE give.
func (r *role) setOptions(st *grammar.RoleStmt) {
	o := st.Opts
	if o.Login != nil {
		r.login = *o.Login
	}
	if o.Superuser != nil {
		r.super = *o.Superuser
	}
	if o.Password != nil {
		r.setPassword(*o.Password)
	}
}

func (a *Roles) createRole(user string, st *grammar.RoleStmt) error {
	o := st.Opts
	if !a.has(user, "CREATE", grammar.Resource{Kind: grammar.ResAllRoles}) {
		return Unauthorized("User %s has no CREATE permission on <all roles> or any of its parents", user)
	}
	if o.Superuser != nil && *o.Superuser && !a.isSuper(user) {
		return Unauthorized("Only superusers can create a role with superuser status")
	}
	if a.roles[st.Name] != nil {
		if st.IfExists {
			return nil
		}
		return cqlvalue.Invalidf("%s already exists", st.Name)
	}
	r := newRole(st.Name)
	r.setOptions(st)
	a.roles[r.name] = r
	if !a.isSuper(user) {
		// Cassandra grants its creator every permission on a new role.
		res := grammar.Resource{Kind: grammar.ResRole, Name: r.name}
		creator := a.roles[user]
		creator.permissions[res.Key()], creator.resources[res.Key()] = res.Applicable(), res
	}
	return nil
}

func (a *Roles) alterRole(user string, st *grammar.RoleStmt) error {
	o := st.Opts
	r := a.roles[st.Name]
	if r == nil {
		return cqlvalue.Invalidf("%s doesn't exist", st.Name)
	}
	if o.Superuser != nil {
		if !a.isSuper(user) {
			return Unauthorized("Only superusers are allowed to alter superuser status")
		}
		if a.grantedTo(user, st.Name) {
			return Unauthorized("You aren't allowed to alter your own superuser status or that of a role granted to you")
		}
	}
	if self := st.Name == user; !self || o.Login != nil || o.Superuser != nil {
		if !a.has(user, "ALTER", grammar.Resource{Kind: grammar.ResRole, Name: st.Name}) {
			return Unauthorized("User %s does not have sufficient privileges to perform the requested operation", user)
		}
	}
	r.setOptions(st)
	return nil
}

func (a *Roles) dropRole(user string, st *grammar.RoleStmt) error {
	r := a.roles[st.Name]
	if r == nil {
		if st.IfExists {
			return nil
		}
		return cqlvalue.Invalidf("%s doesn't exist", st.Name)
	}
	if st.Name == user {
		return cqlvalue.Invalidf("Cannot DROP primary role for current login")
	}
	if !a.has(user, "DROP", grammar.Resource{Kind: grammar.ResRole, Name: st.Name}) {
		return Unauthorized("User %s has no DROP permission on <role %s> or any of its parents", user, st.Name)
	}
	if r.super && !a.isSuper(user) {
		return Unauthorized("Only superusers can drop a role with superuser status")
	}
	delete(a.roles, st.Name)
	res := grammar.Resource{Kind: grammar.ResRole, Name: st.Name}
	for _, o := range a.roles {
		o.memberOf = slices.DeleteFunc(o.memberOf, func(m string) bool { return m == st.Name })
		delete(o.permissions, res.Key())
		delete(o.resources, res.Key())
	}
	return nil
}

// resolve completes and checks the resource of GRANT, REVOKE or LIST PERMISSIONS: schema
// for those of the schema, the roles for a role. The caller holds a.mu.
func (a *Roles) resolve(r grammar.Resource, schema Schema) (grammar.Resource, error) {
	r, err := schema(r)
	if err != nil {
		return r, err
	}
	if r.Kind == grammar.ResRole && a.roles[r.Name] == nil {
		return r, cqlvalue.Invalidf("Resource %s doesn't exist", r)
	}
	return r, nil
}

func (a *Roles) grantPermissions(user string, st *grammar.GrantStmt, schema Schema) error {
	if a.roles[st.Role] == nil {
		return cqlvalue.Invalidf("Role %s doesn't exist", st.Role)
	}
	res, err := a.resolve(st.Res, schema)
	if err != nil {
		return err
	}
	perms := st.Perms
	if perms == nil {
		perms = res.Applicable()
	}
	var unsupported []string
	for _, p := range perms {
		if !slices.Contains(res.Applicable(), p) {
			unsupported = append(unsupported, p)
		}
	}
	if len(unsupported) > 0 {
		return cqlvalue.Invalidf("Resource type %s does not support the requested permissions: [%s]", res.ClassName(), strings.Join(unsupported, ", "))
	}
	if !a.has(user, "AUTHORIZE", res) {
		return Unauthorized("User %s has no AUTHORIZE permission on %s or any of its parents", user, res)
	}
	for _, p := range perms {
		if !a.has(user, p, res) {
			return Unauthorized("User %s has no %s permission on %s or any of its parents", user, p, res)
		}
	}
	r := a.roles[st.Role]
	cur := r.permissions[res.Key()]
	var next []string
	for _, p := range grammar.PermissionNames {
		in := slices.Contains(cur, p)
		if slices.Contains(perms, p) {
			in = !st.Revoke
		}
		if in {
			next = append(next, p)
		}
	}
	if len(next) == 0 {
		delete(r.permissions, res.Key())
		delete(r.resources, res.Key())
	} else {
		r.permissions[res.Key()], r.resources[res.Key()] = next, res
	}
	return nil
}

func (a *Roles) grantRole(user string, st *grammar.GrantRoleStmt) error {
	role, grantee := a.roles[st.Role], a.roles[st.Whom]
	if role == nil {
		return cqlvalue.Invalidf("%s doesn't exist", st.Role)
	}
	if grantee == nil {
		return cqlvalue.Invalidf("%s doesn't exist", st.Whom)
	}
	if !a.has(user, "AUTHORIZE", grammar.Resource{Kind: grammar.ResRole, Name: st.Role}) {
		return Unauthorized("User %s has no AUTHORIZE permission on <role %s> or any of its parents", user, st.Role)
	}
	if st.Revoke {
		if !slices.Contains(grantee.memberOf, st.Role) {
			return cqlvalue.Invalidf("%s is not a member of %s", st.Whom, st.Role)
		}
		grantee.memberOf = slices.DeleteFunc(grantee.memberOf, func(m string) bool { return m == st.Role })
		return nil
	}
	if a.grantedTo(st.Whom, st.Role) {
		return cqlvalue.Invalidf("%s is a member of %s", st.Whom, st.Role)
	}
	if a.grantedTo(st.Role, st.Whom) {
		return cqlvalue.Invalidf("%s is a member of %s", st.Role, st.Whom)
	}
	grantee.memberOf = append(grantee.memberOf, st.Role)
	slices.Sort(grantee.memberOf)
	return nil
}
