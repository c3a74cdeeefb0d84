package grammar

import "strings"

// The parsing of role and permission statements: CREATE/ALTER/DROP ROLE and USER, GRANT,
// REVOKE, LIST ROLES, LIST USERS and LIST PERMISSIONS.

type roleOp uint8

const (
	RoleCreate roleOp = iota
	RoleAlter
	roleDrop
)

// roleOpts are the WITH options of CREATE and ALTER ROLE; nil means not given.
type roleOpts struct {
	Password  *string
	Hashed    bool // HASHED PASSWORD
	Login     *bool
	Superuser *bool
	Options   bool // OPTIONS = {...}
	Dcs       *[]string
	AllDCs    bool
}

type RoleStmt struct {
	Op       roleOp
	user     bool // CREATE/ALTER/DROP USER
	Name     string
	IfExists bool // IF NOT EXISTS for CREATE
	Opts     roleOpts
}

// resKind is the kind of a resource of permissions.
type resKind uint8

const (
	ResAllKeyspaces resKind = iota
	ResKeyspace
	ResTable
	ResAllRoles
	ResRole
	resAllFunctions
	ResKeyspaceFunctions
	ResFunction
)

// resource is what a permission is granted on, as Cassandra's DataResource, RoleResource
// and FunctionResource.
type Resource struct {
	Kind     resKind
	Ks, Name string
	Args     []*TypeRef // a function's argument types, as written
	ArgText  []string   // and resolved
}

type GrantStmt struct {
	Revoke bool
	Perms  []string // nil: ALL PERMISSIONS
	Res    Resource
	Role   string
}

type GrantRoleStmt struct {
	Revoke     bool
	Role, Whom string
}

type ListRolesStmt struct {
	Users       bool // LIST USERS
	Of          string
	Norecursive bool
}

type ListPermsStmt struct {
	Perms       []string // nil: ALL
	Res         *Resource
	Of          string
	Norecursive bool
}

func (*RoleStmt) StmtName() string      { return "ROLE" }
func (*GrantStmt) StmtName() string     { return "GRANT" }
func (*GrantRoleStmt) StmtName() string { return "GRANT ROLE" }
func (*ListRolesStmt) StmtName() string { return "LIST ROLES" }
func (*ListPermsStmt) StmtName() string { return "LIST PERMISSIONS" }

// roleName reads a role's name: a name (unquoted ones in lower case) or a string.
func (p authParser) roleName() string {
	if p.tok.kind == tString {
		s := p.tok.text
		p.advance()
		return s
	}
	return p.identAny()
}

// roleStatement reads CREATE, ALTER or DROP ROLE or USER, after the verb.
func (p authParser) roleStatement(op roleOp) Statement {
	st := &RoleStmt{Op: op, user: p.isKeyword("user")}
	p.advance() // ROLE or USER
	switch op {
	case RoleCreate:
		st.IfExists = p.ifNotExists()
	case roleDrop:
		st.IfExists = p.ifExists()
	}
	st.Name = p.roleName()
	switch {
	case op == roleDrop:
	case st.user:
		p.userOptions(&st.Opts)
	case !p.acceptKeyword("with"):
		if op == RoleAlter {
			p.expectKeyword("with")
		}
	default:
		p.roleOptions(&st.Opts)
	}
	return st
}

// userOptions reads the legacy options of CREATE or ALTER USER, [WITH PASSWORD 'p']
// [SUPERUSER | NOSUPERUSER], into o: a user logs in.
func (p authParser) userOptions(o *roleOpts) {
	login := true
	o.Login = &login
	if p.acceptKeyword("with") {
		p.expectKeyword("password")
		if p.tok.kind != tString {
			p.unexpected()
		}
		pw := p.tok.text
		o.Password = &pw
		p.advance()
	}
	switch {
	case p.acceptKeyword("superuser"):
		b := true
		o.Superuser = &b
	case p.acceptKeyword("nosuperuser"):
		b := false
		o.Superuser = &b
	}
}

// roleOptions reads the options of CREATE or ALTER ROLE after WITH, joined by AND, into o.
func (p authParser) roleOptions(o *roleOpts) {
	for {
		switch {
		case p.acceptKeyword("password"):
			p.expectPunct("=")
			if p.tok.kind != tString {
				p.failPlain("Invalid value for property 'PASSWORD'. It must be a string")
			}
			pw := p.tok.text
			o.Password = &pw
			p.advance()
		case p.acceptKeyword("hashed"):
			p.expectKeyword("password")
			p.expectPunct("=")
			p.constantText()
			o.Hashed = true
		case p.isKeyword("login"), p.isKeyword("superuser"):
			p.roleFlag(o)
		case p.acceptKeyword("options"):
			p.expectPunct("=")
			p.stringMap()
			o.Options = true
		case p.acceptKeyword("access"):
			p.datacenters(o)
		default:
			p.unexpected()
		}
		if !p.acceptKeyword("and") {
			return
		}
	}
}

// roleFlag reads LOGIN = b or SUPERUSER = b into o, b being true or false.
func (p authParser) roleFlag(o *roleOpts) {
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
		o.Login = &b
	} else {
		o.Superuser = &b
	}
}

// datacenters reads ACCESS TO ALL DATACENTERS or ACCESS TO DATACENTERS {'dc', ...} into o,
// after ACCESS.
func (p authParser) datacenters(o *roleOpts) {
	p.expectKeyword("to")
	if p.acceptKeyword("all") {
		p.expectKeyword("datacenters")
		o.AllDCs = true
		return
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
	o.Dcs = &dcs
}

var PermissionNames = []string{"CREATE", "ALTER", "DROP", "SELECT", "MODIFY", "AUTHORIZE", "DESCRIBE", "EXECUTE"}

// permissions reads ALL [PERMISSIONS] or one permission [PERMISSION]; nil is ALL.
func (p authParser) permissions() []string {
	if p.acceptKeyword("all") {
		p.acceptKeyword("permissions")
		return nil
	}
	name := strings.ToUpper(p.tok.text)
	for _, n := range PermissionNames {
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
func (p authParser) resource() Resource {
	switch {
	case p.acceptKeyword("all"):
		switch {
		case p.acceptKeyword("keyspaces"):
			return Resource{Kind: ResAllKeyspaces}
		case p.acceptKeyword("roles"):
			return Resource{Kind: ResAllRoles}
		case p.acceptKeyword("functions"):
			if p.acceptKeyword("in") {
				p.expectKeyword("keyspace")
				return Resource{Kind: ResKeyspaceFunctions, Ks: p.ident()}
			}
			return Resource{Kind: resAllFunctions}
		case p.isKeyword("mbeans"):
			p.failPlain("MBean resources are not supported by the embedded node")
		}
		p.unexpected()
	case p.acceptKeyword("keyspace"):
		return Resource{Kind: ResKeyspace, Ks: p.ident()}
	case p.acceptKeyword("role"):
		return Resource{Kind: ResRole, Name: p.roleName()}
	case p.isKeyword("mbean"), p.isKeyword("mbeans"):
		p.failPlain("MBean resources are not supported by the embedded node")
	case p.acceptKeyword("function"):
		n := p.tableName()
		r := Resource{Kind: ResFunction, Ks: n.Ks, Name: n.Name}
		p.expectPunct("(")
		if !p.acceptPunct(")") {
			for {
				r.Args = append(r.Args, p.typ(0))
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
	return Resource{Kind: ResTable, Ks: n.Ks, Name: n.Name}
}

// grant reads GRANT and REVOKE, of permissions or of roles, after the verb.
func (p authParser) grant(revoke bool) Statement {
	to := "to"
	if revoke {
		to = "from"
	}
	isPerm := p.isKeyword("all")
	for _, n := range PermissionNames {
		isPerm = isPerm || p.tok.kind == tIdent && strings.EqualFold(p.tok.text, n) && !(p.peek(1).kind == tIdent && strings.EqualFold(p.peek(1).text, to))
	}
	if !isPerm {
		st := &GrantRoleStmt{Revoke: revoke, Role: p.roleName()}
		p.expectKeyword(to)
		st.Whom = p.roleName()
		return st
	}
	st := &GrantStmt{Revoke: revoke, Perms: p.permissions()}
	p.expectKeyword("on")
	st.Res = p.resource()
	p.expectKeyword(to)
	st.Role = p.roleName()
	return st
}

// list reads LIST ROLES, LIST USERS and LIST PERMISSIONS, after LIST.
func (p authParser) list() Statement {
	switch {
	case p.acceptKeyword("roles"):
		st := &ListRolesStmt{}
		if p.acceptKeyword("of") {
			st.Of = p.roleName()
		}
		st.Norecursive = p.acceptKeyword("norecursive")
		return st
	case p.acceptKeyword("users"):
		return &ListRolesStmt{Users: true}
	}
	st := &ListPermsStmt{Perms: p.permissions()}
	if p.acceptKeyword("on") {
		r := p.resource()
		st.Res = &r
	}
	if p.acceptKeyword("of") {
		st.Of = p.roleName()
	}
	st.Norecursive = p.acceptKeyword("norecursive")
	return st
}
