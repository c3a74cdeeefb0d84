package tracing

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/cql/cqltext"
)

// Filter narrows what tracing records and samples, in every mode: a request outside it is
// not traced at all (a sampled decision outside it does not set the node's tracing flag).
// Its parts are ANDed; a zero part matches everything. The zero Filter matches every
// request.
type Filter struct {
	Keyspace  string       `json:"keyspace,omitempty"`  // the keyspace the statement's text names
	Table     string       `json:"table,omitempty"`     // the table the statement's text names
	User      string       `json:"user,omitempty"`      // the connection's SASL PLAIN username
	Client    netip.Prefix `json:"client,omitzero"`     // the client's address
	Statement string       `json:"statement,omitempty"` // 0x… prepared id, or a substring of the normalized text
	Opcode    string       `json:"opcode,omitempty"`    // QUERY, EXECUTE, BATCH or PREPARE

	op  cql.Opcode
	id  []byte // Statement as a prepared id
	sub string // Statement as a substring
}

// FilterParams are the parameter names of ParseFilter.
var FilterParams = []string{"keyspace", "table", "user", "client", "statement", "opcode"}

// FilterError is a bad filter parameter.
type FilterError struct{ Param, Value, Want string }

func (e *FilterError) Error() string {
	return fmt.Sprintf("bad %s %q: want %s", e.Param, e.Value, e.Want)
}

// filterName reads a keyspace or table name of a filter by CQL's rule, as a statement's
// target is read: unquoted it folds to lower case, "Quoted" keeps its case.
func filterName(v string) (string, bool) {
	t := cqltext.Next(v, 0)
	if t.End != len(v) || t.Unterminated() || t.Kind != cqltext.Ident && t.Kind != cqltext.QuotedIdent {
		return "", false
	}
	return cqltext.Name(v, t), true
}

// ParseFilter builds a Filter from parameters named as in FilterParams. It returns a
// *FilterError naming the first bad one.
func ParseFilter(p map[string]string) (Filter, error) {
	var f Filter
	f.User = p["user"]
	for _, n := range [...]struct {
		param string
		dst   *string
	}{{"keyspace", &f.Keyspace}, {"table", &f.Table}} {
		v, ok := p[n.param]
		if !ok || v == "" {
			continue
		}
		name, ok := filterName(v)
		if !ok {
			return Filter{}, &FilterError{n.param, v, `a CQL name: unquoted (matched in lower case, as CQL folds it), or "Quoted" to match its case`}
		}
		*n.dst = name
	}
	if s, ok := p["client"]; ok {
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return Filter{}, &FilterError{"client", s, "an address or a CIDR, such as 10.0.0.0/8 or 127.0.0.1"}
			}
			pfx = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		f.Client = pfx.Masked()
	}
	if s, ok := p["statement"]; ok {
		f.Statement = s
		if strings.HasPrefix(s, "0x") {
			id, err := hex.DecodeString(s[2:])
			if err != nil || len(id) == 0 {
				return Filter{}, &FilterError{"statement", s, "a prepared id in hex (0x…) or a substring of the statement's normalized text"}
			}
			f.id = id
		} else {
			f.sub, _ = cql.NormalizeQuery(s, false, 0)
		}
	}
	if s, ok := p["opcode"]; ok {
		switch strings.ToUpper(s) {
		case "QUERY":
			f.op = cql.OpQuery
		case "EXECUTE":
			f.op = cql.OpExecute
		case "BATCH":
			f.op = cql.OpBatch
		case "PREPARE":
			f.op = cql.OpPrepare
		default:
			return Filter{}, &FilterError{"opcode", s, "one of QUERY, EXECUTE, BATCH, PREPARE"}
		}
		f.Opcode = strings.ToUpper(s)
	}
	return f, nil
}

// IsZero reports whether f matches every request.
func (f Filter) IsZero() bool {
	return f.Keyspace == "" && f.Table == "" && f.User == "" && !f.Client.IsValid() && f.Statement == "" && f.op == 0
}
