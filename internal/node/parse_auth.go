package node

import "strings"

// The parsing of role and permission statements: CREATE/ALTER/DROP ROLE and USER, GRANT,
// REVOKE, LIST ROLES, LIST USERS and LIST PERMISSIONS.

type roleOp uint8

const (
	roleCreate roleOp = iota
	roleAlter
	roleDrop
)

// roleOpts are the WITH options of CREATE and ALTER ROLE; nil means not given.
type roleOpts struct {
	password  *string
	hashed    bool // HASHED PASSWORD
	login     *bool
	superuser *bool
	options   bool // OPTIONS = {...}
	dcs       *[]string
	allDCs    bool
}

type roleStmt struct {
	op       roleOp
	user     bool // CREATE/ALTER/DROP USER
	name     string
	ifExists bool // IF NOT EXISTS for CREATE
	opts     roleOpts
}

// resKind is the kind of a resource of permissions.
type resKind uint8

const (
	resAllKeyspaces resKind = iota
	resKeyspace
	resTable
	resAllRoles
	resRole
	resAllFunctions
	resKeyspaceFunctions
	resFunction
)

// resource is what a permission is granted on, as Cassandra's DataResource, RoleResource
// and FunctionResource.
type resource struct {
	kind     resKind
	ks, name string
	args     []*typeRef // a function's argument types, as written
	argText  []string   // and resolved
}

type grantStmt struct {
	revoke bool
	perms  []string // nil: ALL PERMISSIONS
	res    resource
	role   string
}

type grantRoleStmt struct {
	revoke     bool
	role, whom string
}

type listRolesStmt struct {
	users       bool // LIST USERS
	of          string
	norecursive bool
}

type listPermsStmt struct {
	perms       []string // nil: ALL
	res         *resource
	of          string
	norecursive bool
}

func (*roleStmt) stmtName() string      { return "ROLE" }
func (*grantStmt) stmtName() string     { return "GRANT" }
func (*grantRoleStmt) stmtName() string { return "GRANT ROLE" }
func (*listRolesStmt) stmtName() string { return "LIST ROLES" }
func (*listPermsStmt) stmtName() string { return "LIST PERMISSIONS" }

// roleName reads a role's name: a name (unquoted ones in lower case) or a string.
func (p *parser) roleName() string {
	if p.tok.kind == tString {
		s := p.tok.text
		p.advance()
		return s
	}
	return p.identAny()
}

// roleStatement reads CREATE, ALTER or DROP ROLE or USER, after the verb.
func (p *parser) roleStatement(op roleOp) statement {
	st := &roleStmt{op: op, user: p.isKeyword("user")}
	p.advance() // ROLE or USER
	switch op {
	case roleCreate:
		st.ifExists = p.ifNotExists()
	case roleDrop:
		st.ifExists = p.ifExists()
	}
	st.name = p.roleName()
	if op == roleDrop {
		return st
	}
	if st.user {
		// The legacy form: [WITH PASSWORD 'p'] [SUPERUSER | NOSUPERUSER]; a user logs in.
		login := true
		st.opts.login = &login
		if p.acceptKeyword("with") {
			p.expectKeyword("password")
			if p.tok.kind != tString {
				p.unexpected()
			}
			pw := p.tok.text
			st.opts.password = &pw
			p.advance()
		}
		switch {
		case p.acceptKeyword("superuser"):
			b := true
			st.opts.superuser = &b
		case p.acceptKeyword("nosuperuser"):
			b := false
			st.opts.superuser = &b
		}
		return st
	}
	if !p.acceptKeyword("with") {
		if op == roleAlter {
			p.expectKeyword("with")
		}
		return st
	}
	for {
		switch {
		case p.acceptKeyword("password"):
			p.expectPunct("=")
			if p.tok.kind != tString {
				p.failPlain("Invalid value for property 'PASSWORD'. It must be a string")
			}
			pw := p.tok.text
			st.opts.password = &pw
			p.advance()
		case p.acceptKeyword("hashed"):
			p.expectKeyword("password")
			p.expectPunct("=")
			p.constantText()
			st.opts.hashed = true
		case p.isKeyword("login"), p.isKeyword("superuser"):
			name := strings.ToUpper(p.tok.text)
			p.advance()
			p.expectPunct("=")
			v := p.tok
			p.advance()
			b := strings.EqualFold(v.text, "true")
			if v.kind != tIdent || !b && !strings.EqualFold(v.text, "false") {
				p.failPlain("Invalid value for property '%s'. It must be a boolean", name)
			}
			if name == "LOGIN" {
				st.opts.login = &b
			} else {
				st.opts.superuser = &b
			}
		case p.acceptKeyword("options"):
			p.expectPunct("=")
			p.stringMap()
			st.opts.options = true
		case p.acceptKeyword("access"):
			p.expectKeyword("to")
			if p.acceptKeyword("all") {
				p.expectKeyword("datacenters")
				st.opts.allDCs = true
				break
			}
			p.expectKeyword("datacenters")
			p.expectPunct("{")
			dcs := []string{}
			for !p.acceptPunct("}") {
				if p.tok.kind != tString {
					p.unexpected()
				}
				dcs = append(dcs, p.tok.text)
				p.advance()
				if !p.acceptPunct(",") {
					p.expectPunct("}")
					break
				}
			}
			st.opts.dcs = &dcs
		default:
			p.unexpected()
		}
		if !p.acceptKeyword("and") {
			return st
		}
	}
}

var permissionNames = []string{"CREATE", "ALTER", "DROP", "SELECT", "MODIFY", "AUTHORIZE", "DESCRIBE", "EXECUTE"}

// permissions reads ALL [PERMISSIONS] or one permission [PERMISSION]; nil is ALL.
func (p *parser) permissions() []string {
	if p.acceptKeyword("all") {
		p.acceptKeyword("permissions")
		return nil
	}
	name := strings.ToUpper(p.tok.text)
	for _, n := range permissionNames {
		if p.tok.kind == tIdent && name == n {
			p.advance()
			p.acceptKeyword("permission")
			return []string{n}
		}
	}
	p.unexpected()
	return nil
}

// resource reads a resource: ALL KEYSPACES, KEYSPACE ks, [TABLE] [ks.]t, ALL ROLES, ROLE r,
// ALL FUNCTIONS [IN KEYSPACE ks], FUNCTION [ks.]f(types).
func (p *parser) resource() resource {
	switch {
	case p.acceptKeyword("all"):
		switch {
		case p.acceptKeyword("keyspaces"):
			return resource{kind: resAllKeyspaces}
		case p.acceptKeyword("roles"):
			return resource{kind: resAllRoles}
		case p.acceptKeyword("functions"):
			if p.acceptKeyword("in") {
				p.expectKeyword("keyspace")
				return resource{kind: resKeyspaceFunctions, ks: p.ident()}
			}
			return resource{kind: resAllFunctions}
		case p.isKeyword("mbeans"):
			p.failPlain("MBean resources are not supported by the embedded node")
		}
		p.unexpected()
	case p.acceptKeyword("keyspace"):
		return resource{kind: resKeyspace, ks: p.ident()}
	case p.acceptKeyword("role"):
		return resource{kind: resRole, name: p.roleName()}
	case p.isKeyword("mbean"), p.isKeyword("mbeans"):
		p.failPlain("MBean resources are not supported by the embedded node")
	case p.acceptKeyword("function"):
		n := p.tableName()
		r := resource{kind: resFunction, ks: n.ks, name: n.name}
		p.expectPunct("(")
		if !p.acceptPunct(")") {
			for {
				r.args = append(r.args, p.typ(0))
				if !p.acceptPunct(",") {
					break
				}
			}
			p.expectPunct(")")
		}
		return r
	}
	p.acceptKeyword("table")
	n := p.tableName()
	return resource{kind: resTable, ks: n.ks, name: n.name}
}

// grant reads GRANT and REVOKE, of permissions or of roles, after the verb.
func (p *parser) grant(revoke bool) statement {
	to := "to"
	if revoke {
		to = "from"
	}
	isPerm := p.isKeyword("all")
	for _, n := range permissionNames {
		isPerm = isPerm || p.tok.kind == tIdent && strings.EqualFold(p.tok.text, n) && !(p.peek(1).kind == tIdent && strings.EqualFold(p.peek(1).text, to))
	}
	if !isPerm {
		st := &grantRoleStmt{revoke: revoke, role: p.roleName()}
		p.expectKeyword(to)
		st.whom = p.roleName()
		return st
	}
	st := &grantStmt{revoke: revoke, perms: p.permissions()}
	p.expectKeyword("on")
	st.res = p.resource()
	p.expectKeyword(to)
	st.role = p.roleName()
	return st
}

// list reads LIST ROLES, LIST USERS and LIST PERMISSIONS, after LIST.
func (p *parser) list() statement {
	switch {
	case p.acceptKeyword("roles"):
		st := &listRolesStmt{}
		if p.acceptKeyword("of") {
			st.of = p.roleName()
		}
		st.norecursive = p.acceptKeyword("norecursive")
		return st
	case p.acceptKeyword("users"):
		return &listRolesStmt{users: true}
	}
	st := &listPermsStmt{perms: p.permissions()}
	if p.acceptKeyword("on") {
		r := p.resource()
		st.res = &r
	}
	if p.acceptKeyword("of") {
		st.of = p.roleName()
	}
	st.norecursive = p.acceptKeyword("norecursive")
	return st
}
