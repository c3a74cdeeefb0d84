package engine

import (
	"fmt"
	"slices"

	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/storage"
)

// jsonValues decodes the value of INSERT JSON into one value per column of t (in t.cols
// order); a column the JSON leaves out is null, or unset with DEFAULT UNSET.
func jsonValues(t *storage.Table, text string, unsetDefault bool) (vals [][]byte, unset []bool, err error) {
	v, derr := cqlvalue.DecodeJSON(text)
	m, ok := v.(map[string]any)
	if derr != nil || !ok {
		if derr == nil {
			derr = fmt.Errorf("%s is not a JSON object", cqlvalue.JsonClass(v))
		}
		return nil, nil, invalidf("Could not decode JSON string as a map: %v. (String was: %s)", derr, text)
	}
	vals = make([][]byte, len(t.Cols))
	unset = make([]bool, len(t.Cols))
	seen := make([]bool, len(t.Cols))
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		name := cqlvalue.JsonKeyName(k)
		i := slices.IndexFunc(t.Cols, func(c *storage.Column) bool { return c.Name == name })
		if i < 0 {
			return nil, nil, invalidf("JSON values map contains unrecognized column: %s", name)
		}
		b, err := cqlvalue.FromJSON(m[k], t.Cols[i].Typ, 0)
		if err != nil {
			return nil, nil, invalidf("Error decoding JSON value for %s: %s", name, err)
		}
		if b != nil {
			if verr := cqlvalue.Validate(t.Cols[i].Typ, b, name); verr != nil {
				return nil, nil, verr
			}
		}
		vals[i], seen[i] = b, true
	}
	for i := range seen {
		unset[i] = !seen[i] && unsetDefault
	}
	return vals, unset, nil
}
