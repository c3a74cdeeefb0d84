package engine

import (
	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/grammar"
	"github.com/tracecar/tracecar/internal/node/storage"
)

// A schema change in progress (ddl), and what every schema statement shares: the lookups of
// what it names, the checks of what may change, and the permissions it needs and grants.
// The statements themselves are above: ddl.go's keyspaces and tables, functions.go,
// index.go, udt.go and view.go.

// ddl is one schema change in progress: the schema it starts from, the copy it changes, and
// what it must do once the copy is published.
type ddl struct {
	e      *Engine
	sc, n  *storage.Schema
	x      *execCtx
	ks     string                       // the keyspace of unqualified names
	cloned map[string]*storage.Keyspace // keyspaces of n already copied
	events []cql.SchemaChange           // pushed after the change itself, for other objects it changed
	stale  map[*storage.TableStore]bool // tables whose prepared statements must be prepared again
	after  []func()                     // work on the data, once the new schema is published
}

func validName(s string) bool {
	if s == "" || len(s) > 48 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// keyspaceName returns the keyspace a statement names, or the default one.
func (d *ddl) keyspaceName(ks string) (string, error) { return keyspaceOf(ks, d.ks) }

// noKeyspace is Cassandra's error for a schema statement on keyspace ks, which does not
// exist: none with IF EXISTS (ifExists), where the statement changes nothing.
func noKeyspace(ks string, ifExists bool) error {
	if ifExists {
		return nil
	}
	return invalidf("Keyspace '%s' doesn't exist", ks)
}

// keyspace returns the keyspace a schema statement names (the default one when name is
// empty) in the schema the change starts from; when it does not exist, nil and
// noKeyspace's error.
func (d *ddl) keyspace(name string, ifExists bool) (*storage.Keyspace, error) {
	ks, err := d.keyspaceName(name)
	if err != nil {
		return nil, err
	}
	if k := d.sc.Keyspaces[ks]; k != nil {
		return k, nil
	}
	return nil, noKeyspace(ks, ifExists)
}

// keyspaceToCreateIn returns keyspace ks, where a table or view is to be created, once the
// session's role holds what it needs (checked first: Cassandra authorizes before it looks)
// and the keyspace is no system one (modifiable).
func (d *ddl) keyspaceToCreateIn(ks string, n need) (*storage.Keyspace, error) {
	if err := d.require(n.Perm, n.Res); err != nil {
		return nil, err
	}
	k, err := d.keyspace(ks, false)
	if k == nil {
		return nil, err
	}
	if err := modifiable(k, "CREATE", "<keyspace "+ks+">"); err != nil {
		return nil, err
	}
	return k, nil
}

// tableLookup is how a statement that changes a table finds it, in Cassandra's words for
// that statement when it does not exist.
type tableLookup struct {
	perm          string // ALTER or DROP: what the session's role must hold on the table
	ifExists      bool   // IF EXISTS: a missing table (or keyspace) changes nothing, with no error
	keyspaceFirst bool   // a missing keyspace is noKeyspace's error, not the table's
	missing       string // the missing table's error: a format of the keyspace's and the table's names
}

// lookup finds, with find, what a schema statement names in the schema the change starts
// from: name's keyspace (the default one when it names none) and what find returns in it.
// When either is missing, the object is nil and the error that of format missing (of the
// keyspace's name and name.Name), none with IF EXISTS (ifExists).
func lookup[T any](d *ddl, name grammar.TableName, ifExists bool, missing string, find func(*storage.Keyspace) *T) (*storage.Keyspace, *T, error) {
	ks, err := d.keyspaceName(name.Ks)
	if err != nil {
		return nil, nil, err
	}
	k := d.sc.Keyspaces[ks]
	var obj *T
	if k != nil {
		obj = find(k)
	}
	if obj == nil {
		if ifExists {
			return nil, nil, nil
		}
		return nil, nil, invalidf(missing, ks, name.Name)
	}
	return k, obj, nil
}

// tableToChange returns the table a schema statement names, and its keyspace, in the schema
// the change starts from, once the session's role may change it (mayChangeTable). A table
// that does not exist is a nil table, with the error that l words.
func (d *ddl) tableToChange(name grammar.TableName, l tableLookup) (*storage.Keyspace, *storage.Table, error) {
	if l.keyspaceFirst {
		if k, err := d.keyspace(name.Ks, l.ifExists); k == nil {
			return nil, nil, err
		}
	}
	k, t, err := lookup(d, name, l.ifExists, l.missing, func(k *storage.Keyspace) *storage.Table { return k.Tables[name.Name] })
	if t == nil {
		return nil, nil, err
	}
	if err := d.mayChangeTable(l.perm, k, t); err != nil {
		return nil, nil, err
	}
	return k, t, nil
}

// mayChangeTable checks that the session's role holds perm (ALTER or DROP) on table t of
// keyspace k, and that k is not a system keyspace (modifiable).
func (d *ddl) mayChangeTable(perm string, k *storage.Keyspace, t *storage.Table) error {
	if err := d.require(perm, grammar.Resource{Kind: grammar.ResTable, Ks: k.Name, Name: t.Name}); err != nil {
		return err
	}
	return modifiable(k, perm, "<table "+k.Name+"."+t.Name+">")
}

// mutable returns the copy of keyspace name in the new schema, copying it the first time.
func (d *ddl) mutable(name string) *storage.Keyspace {
	if k := d.cloned[name]; k != nil {
		return k
	}
	k := d.n.Keyspaces[name].Clone()
	d.n.Keyspaces[name] = k
	d.cloned[name] = k
	return k
}

// replicatedSystem lists the system keyspaces that are replicated: their replication can be
// altered, nothing else.
var replicatedSystem = map[string]bool{"system_auth": true, "system_traces": true, "system_distributed": true}

// modifiable refuses schema changes to system keyspaces as Cassandra's ClientState does.
// perm is CREATE, ALTER or DROP, and resource the DataResource's name, such as
// "<table ks.t>".
func modifiable(k *storage.Keyspace, perm, resource string) error {
	if !k.System {
		return nil
	}
	if replicatedSystem[k.Name] {
		if perm == "ALTER" && resource == "<keyspace "+k.Name+">" {
			return nil
		}
		return &cql.Error{Code: cql.ErrCodeUnauthorized, Message: "Cannot " + perm + " " + resource}
	}
	return &cql.Error{Code: cql.ErrCodeUnauthorized, Message: k.Name + " keyspace is not user-modifiable."}
}

// tableString names a table as Cassandra's TableMetadata.toString does.
func tableString(t *storage.Table) string {
	return cqlvalue.QuoteName(t.Ks) + "." + cqlvalue.QuoteName(t.Name)
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
