package node

import "strings"

// String names the resource as Cassandra's messages do: <table ks.t>.
func (r resource) String() string {
	switch r.kind {
	case resAllKeyspaces:
		return "<all keyspaces>"
	case resKeyspace:
		return "<keyspace " + r.ks + ">"
	case resTable:
		return "<table " + r.ks + "." + r.name + ">"
	case resAllRoles:
		return "<all roles>"
	case resRole:
		return "<role " + r.name + ">"
	case resAllFunctions:
		return "<all functions>"
	case resKeyspaceFunctions:
		return "<all functions in " + r.ks + ">"
	}
	return "<function " + r.ks + "." + r.name + "(" + strings.Join(r.argText, ", ") + ")>"
}

// key is the resource's name in system_auth, as Cassandra's IResource.getName: data/ks/t.
func (r resource) key() string {
	switch r.kind {
	case resAllKeyspaces:
		return "data"
	case resKeyspace:
		return "data/" + r.ks
	case resTable:
		return "data/" + r.ks + "/" + r.name
	case resAllRoles:
		return "roles"
	case resRole:
		return "roles/" + r.name
	case resAllFunctions:
		return "functions"
	case resKeyspaceFunctions:
		return "functions/" + r.ks
	}
	return "functions/" + r.ks + "/" + r.name + "[" + strings.Join(r.argText, "^") + "]"
}

// parent returns the resource a permission on r is inherited from.
func (r resource) parent() (resource, bool) {
	switch r.kind {
	case resKeyspace:
		return resource{kind: resAllKeyspaces}, true
	case resTable:
		return resource{kind: resKeyspace, ks: r.ks}, true
	case resRole:
		return resource{kind: resAllRoles}, true
	case resKeyspaceFunctions:
		return resource{kind: resAllFunctions}, true
	case resFunction:
		return resource{kind: resKeyspaceFunctions, ks: r.ks}, true
	}
	return resource{}, false
}

// applicable lists the permissions that apply to the resource, in Cassandra's order.
func (r resource) applicable() []string {
	switch r.kind {
	case resAllKeyspaces, resKeyspace:
		return []string{"CREATE", "ALTER", "DROP", "SELECT", "MODIFY", "AUTHORIZE"}
	case resTable:
		return []string{"ALTER", "DROP", "SELECT", "MODIFY", "AUTHORIZE"}
	case resAllRoles:
		return []string{"CREATE", "ALTER", "DROP", "AUTHORIZE", "DESCRIBE"}
	case resRole:
		return []string{"ALTER", "DROP", "AUTHORIZE"}
	case resAllFunctions, resKeyspaceFunctions:
		return []string{"CREATE", "ALTER", "DROP", "AUTHORIZE", "EXECUTE"}
	}
	return []string{"ALTER", "DROP", "AUTHORIZE", "EXECUTE"}
}

func (r resource) className() string {
	switch r.kind {
	case resAllRoles, resRole:
		return "RoleResource"
	case resAllFunctions, resKeyspaceFunctions, resFunction:
		return "FunctionResource"
	}
	return "DataResource"
}
