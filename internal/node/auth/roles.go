// Package auth is the embedded node's roles and permissions, as Cassandra 4.1 with
// PasswordAuthenticator, CassandraAuthorizer and CassandraRoleManager: roles with their
// logins, passwords, superuser status and the roles granted to them; permissions on
// keyspaces, tables, roles and functions, inherited along each resource's parents and
// through granted roles; the rows of the system_auth tables that show them. The engine
// (internal/node/engine) runs the statements, checks what they need, and resolves the
// resources that are in its schema.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/grammar"
)

// role is a role. It is guarded by Roles.mu.
type role struct {
	name        string
	super       bool
	login       bool
	salt, hash  []byte // SHA-256 of salt and password; nil: no password
	memberOf    []string
	permissions map[string][]string // resource key → permissions, in grammar.PermissionNames order
	resources   map[string]grammar.Resource
}

func newRole(name string) *role {
	return &role{name: name, permissions: map[string][]string{}, resources: map[string]grammar.Resource{}}
}

// Roles is a node's roles. Without a login given to New, the node is like a Cassandra
// node with AllowAllAuthenticator: everyone is anonymous, nothing is checked, and role
// statements are refused as Cassandra refuses them to an anonymous user. It is safe for
// concurrent use.
type Roles struct {
	enabled bool // set once, by New
	mu      sync.RWMutex
	roles   map[string]*role
}

// New returns the roles of a node whose superuser logs in as login, "USER:PASS"; with no
// login, the node has no roles (Enabled is false).
func New(login string) *Roles {
	a := &Roles{roles: map[string]*role{}}
	if u, pw, ok := strings.Cut(login, ":"); ok && u != "" {
		a.enabled = true
		r := newRole(u)
		r.super, r.login = true, true
		r.setPassword(pw)
		a.roles[u] = r
	}
	return a
}

// Enabled reports whether the node has roles, and so checks permissions.
func (a *Roles) Enabled() bool { return a.enabled }

func (r *role) setPassword(pw string) {
	r.salt = make([]byte, 16)
	_, _ = rand.Read(r.salt)
	h := sha256.Sum256(append(append([]byte{}, r.salt...), pw...))
	r.hash = h[:]
}

// saltedHash is the role's password as system_auth.roles shows it. Cassandra keeps a bcrypt
// hash; the node keeps a salted SHA-256, spelled so that no one takes it for bcrypt.
func (r *role) saltedHash() []byte {
	if r.hash == nil {
		return nil
	}
	return []byte("$sha256$" + hex.EncodeToString(r.salt) + "$" + hex.EncodeToString(r.hash))
}

// Login checks a login and returns the role's name.
func (a *Roles) Login(user, password string) (string, error) {
	bad := &cql.Error{Code: cql.ErrCodeBadCredentials, Message: "Provided username " + user + " and/or password are incorrect"}
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

// Need is a permission a statement needs.
type Need struct {
	Perm string
	Res  grammar.Resource
}

// readableSystem lists the keyspaces every role may read: what drivers read on connect and
// for their metadata and traces.
var readableSystem = map[string]bool{"system": true, "system_schema": true, "system_virtual_schema": true,
	"system_views": true, "system_traces": true}

// ReadableByAll reports whether every role may read the tables of keyspace ks, which
// SELECT then needs no permission for.
func ReadableByAll(ks string) bool { return readableSystem[ks] }

// rolesOf returns the role and every role granted to it, recursively or only those
// granted to it directly. The caller holds a.mu.
func (a *Roles) rolesOf(name string, recursive bool) []*role {
	var out []*role
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

// grantedTo reports whether role holder, or a role granted to it, is named name. The
// caller holds a.mu.
func (a *Roles) grantedTo(holder, name string) bool {
	return slices.ContainsFunc(a.rolesOf(holder, true), func(r *role) bool { return r.name == name })
}

// isSuper reports whether a role, or one granted to it, is a superuser. The caller holds
// a.mu.
func (a *Roles) isSuper(name string) bool {
	for _, r := range a.rolesOf(name, true) {
		if r.super {
			return true
		}
	}
	return false
}

// has reports whether role name holds perm on res or one of its parents. The caller holds
// a.mu.
func (a *Roles) has(name, perm string, res grammar.Resource) bool {
	if a.isSuper(name) {
		return true
	}
	roles := a.rolesOf(name, true)
	for r, ok := res, true; ok; r, ok = r.Parent() {
		for _, g := range roles {
			if slices.Contains(g.permissions[r.Key()], perm) {
				return true
			}
		}
	}
	return false
}

// Unauthorized is an Unauthorized error (cql.ErrCodeUnauthorized) with the formatted
// message.
func Unauthorized(format string, args ...any) *cql.Error {
	return &cql.Error{Code: cql.ErrCodeUnauthorized, Message: fmt.Sprintf(format, args...)}
}

// Authorize checks that role user holds the permissions a statement needs; "" is a session
// that has not logged in.
func (a *Roles) Authorize(user string, needs []Need) error {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if user == "" {
		return Unauthorized("You have not logged in")
	}
	for _, n := range needs {
		if !a.has(user, n.Perm, n.Res) {
			return Unauthorized("User %s has no %s permission on %s or any of its parents", user, n.Perm, n.Res)
		}
	}
	return nil
}

// Forget removes the permissions on a resource that left the schema, and on its children,
// as Cassandra's AuthSchemaChangeListener does.
func (a *Roles) Forget(res grammar.Resource) {
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

// GrantCreator gives role user, if it is no superuser, every permission on what it created.
func (a *Roles) GrantCreator(user string, res grammar.Resource) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.roles[user]
	if r == nil || a.isSuper(user) {
		return
	}
	r.permissions[res.Key()], r.resources[res.Key()] = res.Applicable(), res
}

// SystemTables are the tables of system_auth that SystemRows writes.
var SystemTables = []string{"roles", "role_members", "role_permissions", "resource_role_permissons_index"}

// SystemRows gives put the rows of the system_auth tables (SystemTables), each as column
// name to serialized value.
func (a *Roles) SystemRows(put func(table string, row map[string][]byte)) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	for _, r := range a.roles {
		row := map[string][]byte{"role": cqlvalue.EncText(r.name), "can_login": cqlvalue.EncBool(r.login), "is_superuser": cqlvalue.EncBool(r.super),
			"salted_hash": r.saltedHash()}
		if len(r.memberOf) > 0 {
			row["member_of"] = cqlvalue.EncTextSet(r.memberOf)
		}
		put("roles", row)
		for _, m := range r.memberOf {
			put("role_members", map[string][]byte{"role": cqlvalue.EncText(m), "member": cqlvalue.EncText(r.name)})
		}
		for key, ps := range r.permissions {
			put("role_permissions", map[string][]byte{"role": cqlvalue.EncText(r.name), "resource": cqlvalue.EncText(key), "permissions": cqlvalue.EncTextSet(ps)})
			put("resource_role_permissons_index", map[string][]byte{"resource": cqlvalue.EncText(key), "role": cqlvalue.EncText(r.name)})
		}
	}
}
