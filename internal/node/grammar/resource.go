package grammar

import "strings"

// String names the resource as Cassandra's messages do: <table ks.t>.
func (r Resource) String() string {
	switch r.Kind {
	case ResAllKeyspaces:
		return "<all keyspaces>"
	case ResKeyspace:
		return "<keyspace " + r.Ks + ">"
	case ResTable:
		return "<table " + r.Ks + "." + r.Name + ">"
	case ResAllRoles:
		return "<all roles>"
	case ResRole:
		return "<role " + r.Name + ">"
	case resAllFunctions:
		return "<all functions>"
	case ResKeyspaceFunctions:
		return "<all functions in " + r.Ks + ">"
	}
	return "<function " + r.Ks + "." + r.Name + "(" + strings.Join(r.ArgText, ", ") + ")>"
}

// key is the resource's name in system_auth, as Cassandra's IResource.getName: data/ks/t.
func (r Resource) Key() string {
	switch r.Kind {
	case ResAllKeyspaces:
		return "data"
	case ResKeyspace:
		return "data/" + r.Ks
	case ResTable:
		return "data/" + r.Ks + "/" + r.Name
	case ResAllRoles:
		return "roles"
	case ResRole:
		return "roles/" + r.Name
	case resAllFunctions:
		return "functions"
	case ResKeyspaceFunctions:
		return "functions/" + r.Ks
	}
	return "functions/" + r.Ks + "/" + r.Name + "[" + strings.Join(r.ArgText, "^") + "]"
}

// parent returns the resource a permission on r is inherited from.
func (r Resource) Parent() (Resource, bool) {
	switch r.Kind {
	case ResKeyspace:
		return Resource{Kind: ResAllKeyspaces}, true
	case ResTable:
		return Resource{Kind: ResKeyspace, Ks: r.Ks}, true
	case ResRole:
		return Resource{Kind: ResAllRoles}, true
	case ResKeyspaceFunctions:
		return Resource{Kind: resAllFunctions}, true
	case ResFunction:
		return Resource{Kind: ResKeyspaceFunctions, Ks: r.Ks}, true
	}
	return Resource{}, false
}

// applicable lists the permissions that apply to the resource, in Cassandra's order.
func (r Resource) Applicable() []string {
	switch r.Kind {
	case ResAllKeyspaces, ResKeyspace:
		return []string{"CREATE", "ALTER", "DROP", "SELECT", "MODIFY", "AUTHORIZE"}
	case ResTable:
		return []string{"ALTER", "DROP", "SELECT", "MODIFY", "AUTHORIZE"}
	case ResAllRoles:
		return []string{"CREATE", "ALTER", "DROP", "AUTHORIZE", "DESCRIBE"}
	case ResRole:
		return []string{"ALTER", "DROP", "AUTHORIZE"}
	case resAllFunctions, ResKeyspaceFunctions:
		return []string{"CREATE", "ALTER", "DROP", "AUTHORIZE", "EXECUTE"}
	}
	return []string{"ALTER", "DROP", "AUTHORIZE", "EXECUTE"}
}

func (r Resource) ClassName() string {
	switch r.Kind {
	case ResAllRoles, ResRole:
		return "RoleResource"
	case resAllFunctions, ResKeyspaceFunctions, ResFunction:
		return "FunctionResource"
	}
	return "DataResource"
}
