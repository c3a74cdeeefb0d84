package client

import (
	"testing"

	"github.com/tracecar/tracecar/internal/cql"
)

// TestQueryConsistencies: a statement's consistency and serial consistency (a profile
// query's consistencyLevel and serialConsistencyLevel) go on its requests; without them
// the session's, and no serial consistency.
func TestQueryConsistencies(t *testing.T) {
	if cl, serial := consistencies(cql.LocalOne, "QUORUM", "LOCAL_SERIAL"); cl != cql.Quorum || serial != cql.LocalSerial {
		t.Errorf("QUORUM, LOCAL_SERIAL: consistency %v, serial %v; want QUORUM and LOCAL_SERIAL", cl, serial)
	}
	if cl, serial := consistencies(cql.LocalOne, "", ""); cl != cql.LocalOne || serial != 0 {
		t.Errorf("no levels: consistency %v, serial %v; want the session's LOCAL_ONE and none", cl, serial)
	}
}
