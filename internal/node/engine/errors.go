package engine

import (
	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/storage"
)

// invalidf returns an Invalid error (cql.ErrCodeInvalid) with the formatted message, as
// cqlvalue.Invalidf: the node's statements fail with it everywhere.
func invalidf(format string, args ...any) *cql.Error { return cqlvalue.Invalidf(format, args...) }

// columnOf returns the column name of t, or the Invalid error that names it undefined.
func columnOf(t *storage.Table, name string) (*storage.Column, error) {
	if col := t.ByName[name]; col != nil {
		return col, nil
	}
	return nil, invalidf("Undefined column name %s in table %s.%s", name, t.Ks, t.Name)
}
