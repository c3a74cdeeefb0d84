package engine

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/grammar"
	"github.com/tracecar/tracecar/internal/node/storage"
)

// Roles and permissions, as Cassandra 4.1 with PasswordAuthenticator, CassandraAuthorizer
// and CassandraRoleManager: roles with their logins, passwords, superuser status and the
// roles granted to them; permissions on keyspaces, tables, roles and functions, inherited
// along each resource's parents and through granted roles; the system_auth tables that show
// them. Without EngineConfig.Auth the node is like a Cassandra node with
// AllowAllAuthenticator: everyone is anonymous, nothing is checked, and role statements
// are refused as Cassandra refuses them to an anonymous user.

func newAuthState(login string) *authState {
	a := &authState{roles: map[string]*roleInfo{}}
	if u, pw, ok := strings.Cut(login, ":"); ok && u != "" {
		a.enabled = true
		r := &roleInfo{name: u, super: true, login: true, permissions: map[string][]string{}, resources: map[string]grammar.Resource{}}
		r.setPassword(pw)
		a.roles[u] = r
	}
	return a
}

func (r *roleInfo) setPassword(pw string) {
	r.salt = make([]byte, 16)
	_, _ = rand.Read(r.salt)
	h := sha256.Sum256(append(append([]byte{}, r.salt...), pw...))
	r.hash = h[:]
}

// saltedHash is the role's password as system_auth.roles shows it. Cassandra keeps a bcrypt
// hash; the node keeps a salted SHA-256, spelled so that no one takes it for bcrypt.
func (r *roleInfo) saltedHash() []byte {
	if r.hash == nil {
		return nil
	}
	return []byte("$sha256$" + hex.EncodeToString(r.salt) + "$" + hex.EncodeToString(r.hash))
}

// Login checks a login and returns the role's name. It is safe for concurrent use.
func (e *Engine) Login(user, password string) (string, error) {
	bad := &cql.Error{Code: cql.ErrCodeBadCredentials, Message: "Provided username " + user + " and/or password are incorrect"}
	a := e.auth
	a.mu.RLock()
	defer a.mu.RUnlock()
	r := a.roles[user]
	if r == nil || r.hash == nil {
		return "", bad
	}
	h := sha256.Sum256(append(append([]byte{}, r.salt...), password...))
	if subtle.ConstantTimeCompare(h[:], r.hash) != 1 {
		return "", bad
	}
	if !r.login {
		return "", &cql.Error{Code: cql.ErrCodeBadCredentials, Message: user + " is not permitted to log in"}
	}
	return r.name, nil
}

// exists reports whether the resource is in the schema (or among the roles).
func (e *Engine) exists(r grammar.Resource) bool {
	sc := e.schema.Load()
	switch r.Kind {
	case grammar.ResKeyspace, grammar.ResKeyspaceFunctions:
		return sc.Keyspaces[r.Ks] != nil
	case grammar.ResTable:
		return sc.Table(r.Ks, r.Name) != nil
	case grammar.ResRole:
		return e.auth.roles[r.Name] != nil
	case grammar.ResFunction:
		k := sc.Keyspaces[r.Ks]
		return k != nil && (k.Functions[r.Name+"("+strings.Join(r.ArgText, ", ")+")"] != nil || k.Aggregates[r.Name+"("+strings.Join(r.ArgText, ", ")+")"] != nil)
	}
	return true
}

// readableSystem lists the keyspaces every role may read: what drivers read on connect and
// for their metadata and traces.
var readableSystem = map[string]bool{"system": true, "system_schema": true, "system_virtual_schema": true,
	"system_views": true, "system_traces": true}

// rolesOf returns the role and every role granted to it, recursively. The caller holds
// a.mu.
func (a *authState) rolesOf(name string, recursive bool) []*roleInfo {
	var out []*roleInfo
	seen := map[string]bool{}
	var walk func(n string, depth int)
	walk = func(n string, depth int) {
		r := a.roles[n]
		if r == nil || seen[n] {
			return
		}
		seen[n] = true
		out = append(out, r)
		if recursive || depth == 0 {
			for _, m := range r.memberOf {
				if recursive {
					walk(m, depth+1)
				} else if mr := a.roles[m]; mr != nil && !seen[m] {
					seen[m] = true
					out = append(out, mr)
				}
			}
		}
	}
	walk(name, 0)
	return out
}

// isSuper reports whether a role, or one granted to it, is a superuser. The caller holds
// a.mu.
func (a *authState) isSuper(name string) bool {
	for _, r := range a.rolesOf(name, true) {
		if r.super {
			return true
		}
	}
	return false
}

// has reports whether role name holds perm on res or one of its parents. The caller holds
// a.mu.
func (a *authState) has(name, perm string, res grammar.Resource) bool {
	if a.isSuper(name) {
		return true
	}
	roles := a.rolesOf(name, true)
	for r, ok := res, true; ok; r, ok = r.Parent() {
		for _, role := range roles {
			if slices.Contains(role.permissions[r.Key()], perm) {
				return true
			}
		}
	}
	return false
}

func unauthorized(format string, args ...any) *cql.Error {
	return &cql.Error{Code: cql.ErrCodeUnauthorized, Message: fmt.Sprintf(format, args...)}
}

// authorize checks that the session's role holds the permissions a statement needs.
func (e *Engine) authorize(s *Session, needs []need) error {
	a := e.auth
	a.mu.RLock()
	defer a.mu.RUnlock()
	if s == nil || s.User == "" {
		return unauthorized("You have not logged in")
	}
	for _, n := range needs {
		if !a.has(s.User, n.perm, n.res) {
			return unauthorized("User %s has no %s permission on %s or any of its parents", s.User, n.perm, n.res)
		}
	}
	return nil
}

// tableNeeds records that the statement needs perm on table t: SELECT or MODIFY. Schema
// statements check theirs when they run (ddl.require).
func (c *compiler) tableNeeds(t *storage.Table, perm string) {
	if perm == "SELECT" && readableSystem[t.Ks] {
		return
	}
	c.needs = append(c.needs, need{perm: perm, res: grammar.Resource{Kind: grammar.ResTable, Ks: t.Ks, Name: t.Name}})
}

// authPlan runs a role or permission statement.
type authPlan struct{ st grammar.Statement }

func (p *authPlan) exec(e *Engine, x *execCtx) (cql.Message, error) {
	a := e.auth
	if !a.enabled || x.s == nil || x.s.User == "" {
		return nil, unauthorized("You have to be logged in and not anonymous to perform this request")
	}
	switch st := p.st.(type) {
	case *grammar.ListRolesStmt:
		a.mu.RLock()
		defer a.mu.RUnlock()
		return e.listRoles(x.s.User, st)
	case *grammar.ListPermsStmt:
		a.mu.RLock()
		defer a.mu.RUnlock()
		return e.listPermissions(x.s, st)
	}
	e.ddlMu.Lock() // with schema changes, so that GRANT sees the resources that exist
	defer e.ddlMu.Unlock()
	a.mu.Lock()
	var err error
	switch st := p.st.(type) {
	case *grammar.RoleStmt:
		err = e.roleChange(x.s.User, st)
	case *grammar.GrantStmt:
		err = e.grantPermissions(x.s, st)
	case *grammar.GrantRoleStmt:
		err = e.grantRole(x.s.User, st)
	}
	if err == nil {
		e.refreshAuth()
	}
	a.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return cql.VoidResult{}, nil
}

func (e *Engine) roleChange(user string, st *grammar.RoleStmt) error {
	a := e.auth
	o := st.Opts
	if o.Hashed {
		return invalidf("HASHED PASSWORD is not supported by the embedded node: it keeps its own hashes, not bcrypt ones")
	}
	if o.Options {
		return invalidf("org.apache.cassandra.auth.CassandraRoleManager doesn't support OPTIONS")
	}
	if o.Dcs != nil || o.AllDCs {
		// Cassandra's default network_authorizer, which the node is like: every role may
		// log in from every data center.
		return invalidf("ACCESS TO DATACENTERS operations not supported by AllowAllNetworkAuthorizer")
	}
	r := a.roles[st.Name]
	switch st.Op {
	case grammar.RoleCreate:
		if !a.has(user, "CREATE", grammar.Resource{Kind: grammar.ResAllRoles}) {
			return unauthorized("User %s has no CREATE permission on <all roles> or any of its parents", user)
		}
		if o.Superuser != nil && *o.Superuser && !a.isSuper(user) {
			return unauthorized("Only superusers can create a role with superuser status")
		}
		if r != nil {
			if st.IfExists {
				return nil
			}
			return invalidf("%s already exists", st.Name)
		}
		r = &roleInfo{name: st.Name, permissions: map[string][]string{}, resources: map[string]grammar.Resource{}}
		if o.Login != nil {
			r.login = *o.Login
		}
		if o.Superuser != nil {
			r.super = *o.Superuser
		}
		if o.Password != nil {
			r.setPassword(*o.Password)
		}
		a.roles[r.name] = r
		if !a.isSuper(user) {
			// Cassandra grants its creator every permission on a new role.
			res := grammar.Resource{Kind: grammar.ResRole, Name: r.name}
			creator := a.roles[user]
			creator.permissions[res.Key()], creator.resources[res.Key()] = res.Applicable(), res
		}
		return nil
	case grammar.RoleAlter:
		if r == nil {
			return invalidf("%s doesn't exist", st.Name)
		}
		self := st.Name == user
		if o.Superuser != nil {
			if !a.isSuper(user) {
				return unauthorized("Only superusers are allowed to alter superuser status")
			}
			if slices.ContainsFunc(a.rolesOf(user, true), func(g *roleInfo) bool { return g.name == st.Name }) {
				return unauthorized("You aren't allowed to alter your own superuser status or that of a role granted to you")
			}
		}
		if !self || o.Login != nil || o.Superuser != nil {
			if !a.has(user, "ALTER", grammar.Resource{Kind: grammar.ResRole, Name: st.Name}) {
				return unauthorized("User %s does not have sufficient privileges to perform the requested operation", user)
			}
		}
		if o.Login != nil {
			r.login = *o.Login
		}
		if o.Superuser != nil {
			r.super = *o.Superuser
		}
		if o.Password != nil {
			r.setPassword(*o.Password)
		}
		return nil
	}
	if r == nil {
		if st.IfExists {
			return nil
		}
		return invalidf("%s doesn't exist", st.Name)
	}
	if st.Name == user {
		return invalidf("Cannot DROP primary role for current login")
	}
	if !a.has(user, "DROP", grammar.Resource{Kind: grammar.ResRole, Name: st.Name}) {
		return unauthorized("User %s has no DROP permission on <role %s> or any of its parents", user, st.Name)
	}
	if r.super && !a.isSuper(user) {
		return unauthorized("Only superusers can drop a role with superuser status")
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

// resolveResource completes and checks the resource of GRANT, REVOKE or LIST PERMISSIONS.
func (e *Engine) resolveResource(s *Session, r grammar.Resource) (grammar.Resource, error) {
	if (r.Kind == grammar.ResTable || r.Kind == grammar.ResFunction) && r.Ks == "" {
		if s.Keyspace == "" {
			return r, invalidf("No keyspace has been specified. USE a keyspace, or explicitly specify keyspace.tablename")
		}
		r.Ks = s.Keyspace
	}
	if r.Kind == grammar.ResFunction {
		k := e.schema.Load().Keyspaces[r.Ks]
		if k == nil {
			return r, invalidf("Resource %s doesn't exist", r)
		}
		args, err := resolveArgs(k.Resolver(), r.Args)
		if err != nil {
			return r, err
		}
		r.ArgText = storage.TypeTexts(args)
	}
	if !e.exists(r) {
		return r, invalidf("Resource %s doesn't exist", r)
	}
	return r, nil
}

func (e *Engine) grantPermissions(s *Session, st *grammar.GrantStmt) error {
	a := e.auth
	user := s.User
	if a.roles[st.Role] == nil {
		return invalidf("Role %s doesn't exist", st.Role)
	}
	res, err := e.resolveResource(s, st.Res)
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
		return invalidf("Resource type %s does not support the requested permissions: [%s]", res.ClassName(), strings.Join(unsupported, ", "))
	}
	if !a.has(user, "AUTHORIZE", res) {
		return unauthorized("User %s has no AUTHORIZE permission on %s or any of its parents", user, res)
	}
	for _, p := range perms {
		if !a.has(user, p, res) {
			return unauthorized("User %s has no %s permission on %s or any of its parents", user, p, res)
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

func (e *Engine) grantRole(user string, st *grammar.GrantRoleStmt) error {
	a := e.auth
	role, grantee := a.roles[st.Role], a.roles[st.Whom]
	if role == nil {
		return invalidf("%s doesn't exist", st.Role)
	}
	if grantee == nil {
		return invalidf("%s doesn't exist", st.Whom)
	}
	if !a.has(user, "AUTHORIZE", grammar.Resource{Kind: grammar.ResRole, Name: st.Role}) {
		return unauthorized("User %s has no AUTHORIZE permission on <role %s> or any of its parents", user, st.Role)
	}
	if st.Revoke {
		if !slices.Contains(grantee.memberOf, st.Role) {
			return invalidf("%s is not a member of %s", st.Whom, st.Role)
		}
		grantee.memberOf = slices.DeleteFunc(grantee.memberOf, func(m string) bool { return m == st.Role })
		return nil
	}
	if slices.ContainsFunc(a.rolesOf(st.Whom, true), func(r *roleInfo) bool { return r.name == st.Role }) {
		return invalidf("%s is a member of %s", st.Whom, st.Role)
	}
	if slices.ContainsFunc(a.rolesOf(st.Role, true), func(r *roleInfo) bool { return r.name == st.Whom }) {
		return invalidf("%s is a member of %s", st.Role, st.Whom)
	}
	grantee.memberOf = append(grantee.memberOf, st.Role)
	slices.Sort(grantee.memberOf)
	return nil
}

func authSpec(table, name string, t cql.TypeInfo) cql.ColumnSpec {
	return cql.ColumnSpec{Keyspace: "system_auth", Table: table, Name: name, Type: t}
}

func (e *Engine) listRoles(user string, st *grammar.ListRolesStmt) (cql.Message, error) {
	a := e.auth
	text, boolean := cql.TypeInfo{ID: cql.TypeVarchar}, cql.TypeInfo{ID: cql.TypeBoolean}
	var roles []*roleInfo
	describeAll := a.has(user, "DESCRIBE", grammar.Resource{Kind: grammar.ResAllRoles})
	switch {
	case st.Of != "":
		if a.roles[st.Of] == nil {
			return nil, invalidf("%s doesn't exist", st.Of)
		}
		if !describeAll && !slices.ContainsFunc(a.rolesOf(user, true), func(r *roleInfo) bool { return r.name == st.Of }) {
			return nil, unauthorized("You are not authorized to view roles granted to %s ", st.Of)
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
	dcs := func(*roleInfo) []byte { return cqlvalue.EncText("ALL") } // AllowAllNetworkAuthorizer
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

func (e *Engine) listPermissions(s *Session, st *grammar.ListPermsStmt) (cql.Message, error) {
	a := e.auth
	user := s.User
	if st.Of != "" && a.roles[st.Of] == nil {
		return nil, invalidf("%s doesn't exist", st.Of)
	}
	var res *grammar.Resource
	if st.Res != nil {
		r, err := e.resolveResource(s, *st.Res)
		if err != nil {
			return nil, err
		}
		res = &r
	}
	if !a.has(user, "DESCRIBE", grammar.Resource{Kind: grammar.ResAllRoles}) {
		if st.Of == "" {
			return nil, unauthorized("You are not authorized to view everyone's permissions")
		}
		if !slices.ContainsFunc(a.rolesOf(user, true), func(r *roleInfo) bool { return r.name == st.Of }) {
			return nil, unauthorized("You are not authorized to view %s's permissions", st.Of)
		}
	}
	var roles []*roleInfo
	switch {
	case st.Of != "" && st.Norecursive:
		roles = []*roleInfo{a.roles[st.Of]} // its own permissions, none it inherits
	case st.Of != "":
		roles = a.rolesOf(st.Of, true)
	default:
		for _, r := range a.roles {
			roles = append(roles, r)
		}
	}
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
	type detail struct {
		role, key string
		res       grammar.Resource
		perm      int
	}
	var details []detail
	for _, r := range roles {
		for key, perms := range r.permissions {
			if !onChain(key) {
				continue
			}
			for _, p := range perms {
				if st.Perms == nil || slices.Contains(st.Perms, p) {
					details = append(details, detail{r.name, key, r.resources[key], slices.Index(grammar.PermissionNames, p)})
				}
			}
		}
	}
	sort.Slice(details, func(i, j int) bool {
		a, b := details[i], details[j]
		if a.role != b.role {
			return a.role < b.role
		}
		if a.key != b.key {
			return a.key < b.key
		}
		return a.perm < b.perm
	})
	text := cql.TypeInfo{ID: cql.TypeVarchar}
	specs := []cql.ColumnSpec{authSpec("permissions", "role", text), authSpec("permissions", "username", text),
		authSpec("permissions", "resource", text), authSpec("permissions", "permission", text)}
	var rows [][][]byte
	for _, d := range details {
		rows = append(rows, [][]byte{cqlvalue.EncText(d.role), cqlvalue.EncText(d.role), cqlvalue.EncText(d.res.String()), cqlvalue.EncText(grammar.PermissionNames[d.perm])})
	}
	return cql.RowsResult{Metadata: cql.RowsMetadata{Columns: specs, ColumnCount: len(specs)}, Rows: rows}, nil
}

// forget removes the permissions on a resource that left the schema, and on its children,
// as Cassandra's AuthSchemaChangeListener does.
func (a *authState) forget(res grammar.Resource) {
	a.mu.Lock()
	defer a.mu.Unlock()
	prefix := res.Key()
	for _, r := range a.roles {
		for key := range r.permissions {
			if key == prefix || strings.HasPrefix(key, prefix+"/") {
				delete(r.permissions, key)
				delete(r.resources, key)
			}
		}
	}
}

// grantCreator gives a role that is no superuser every permission on what it created.
func (a *authState) grantCreator(user string, res grammar.Resource) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.roles[user]
	if r == nil || a.isSuper(user) {
		return
	}
	r.permissions[res.Key()], r.resources[res.Key()] = res.Applicable(), res
}

// refreshAuth rewrites the system_auth tables. The caller holds a.mu.
func (e *Engine) refreshAuth() {
	sc := e.schema.Load()
	now := e.cfg.Now()
	ts := now.UnixMicro()
	fresh := func(name string) *rowWriter {
		return &rowWriter{t: sc.Table("system_auth", name), d: storage.NewTableData(), ts: ts, now: now.Unix()}
	}
	roles, members, perms, index := fresh("roles"), fresh("role_members"), fresh("role_permissions"),
		fresh("resource_role_permissons_index")
	for _, r := range e.auth.roles {
		row := map[string][]byte{"role": cqlvalue.EncText(r.name), "can_login": cqlvalue.EncBool(r.login), "is_superuser": cqlvalue.EncBool(r.super),
			"salted_hash": r.saltedHash()}
		if len(r.memberOf) > 0 {
			row["member_of"] = cqlvalue.EncTextSet(r.memberOf)
		}
		roles.put(row)
		for _, m := range r.memberOf {
			members.put(map[string][]byte{"role": cqlvalue.EncText(m), "member": cqlvalue.EncText(r.name)})
		}
		for key, ps := range r.permissions {
			perms.put(map[string][]byte{"role": cqlvalue.EncText(r.name), "resource": cqlvalue.EncText(key), "permissions": cqlvalue.EncTextSet(ps)})
			index.put(map[string][]byte{"resource": cqlvalue.EncText(key), "role": cqlvalue.EncText(r.name)})
		}
	}
	for _, w := range []*rowWriter{roles, members, perms, index} {
		w.t.Data.Store(w.d)
	}
}

// require checks, when the engine has roles, that the session's role holds perm on res.
func (d *ddl) require(perm string, res grammar.Resource) error {
	if !d.e.auth.enabled {
		return nil
	}
	return d.e.authorize(d.x.s, []need{{perm: perm, res: res}})
}

// created grants the creator of res every permission on it, and dropped forgets the
// permissions on res, once the schema change is published.
func (d *ddl) created(res grammar.Resource) {
	if d.e.auth.enabled && d.x.s != nil {
		user := d.x.s.User
		d.after = append(d.after, func() { d.e.auth.grantCreator(user, res) })
	}
}

func (d *ddl) dropped(res grammar.Resource) {
	if d.e.auth.enabled {
		d.after = append(d.after, func() { d.e.auth.forget(res) })
	}
}
