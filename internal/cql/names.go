package cql

import "strings"

// QuoteName quotes a CQL identifier (a keyspace, table, column or role name) so that it
// keeps its case and may hold any character: in double quotes, a double quote doubled.
func QuoteName(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }
