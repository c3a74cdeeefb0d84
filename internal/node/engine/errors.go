package engine

import (
	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/cqlvalue"
)

// invalidf returns an Invalid error (cql.ErrCodeInvalid) with the formatted message, as
// cqlvalue.Invalidf: the node's statements fail with it everywhere.
func invalidf(format string, args ...any) *cql.Error { return cqlvalue.Invalidf(format, args...) }
