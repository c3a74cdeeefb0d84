package audit

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tracecar/tracecar/internal/cql"
)

// Settings say what is audited. The zero value audits nothing.
type Settings struct {
	Enabled bool
	// Categories is the set of audited categories, a bit per Category (1<<c).
	Categories uint8
	// Keyspaces, when not empty, limits DDL, DML and QUERY records to these keyspaces.
	Keyspaces map[string]bool
	// Tables, when not empty, limits them to these "keyspace.table" names.
	Tables map[string]bool
	// ExcludeUsers are never audited.
	ExcludeUsers map[string]bool
}

// Has reports whether c is among the audited categories.
func (s *Settings) Has(c Category) bool { return s.Categories&(1<<c) != 0 }

// DefaultCategories are the categories audited unless told otherwise: ScyllaDB's default
// audit_categories.
const DefaultCategories = "AUTH,DDL,DCL,ADMIN"

// Params are the names of the settings' parameters, in the API and its errors.
var Params = []string{"enable", "categories", "keyspaces", "tables", "exclude_users"}

// ParamError is a bad value of a parameter: what ParseSettings returns, for the API to
// answer 400 naming the parameter and what it accepts.
type ParamError struct {
	Param, Value, Want string
}

// Error says which parameter is bad, its value, and what it accepts.
func (e *ParamError) Error() string {
	return fmt.Sprintf("%s %q: want %s", e.Param, e.Value, e.Want)
}

// All is the value of keyspaces, tables and exclude_users that clears the list: every
// keyspace, every table, no user excluded.
const All = "*"

// ParseSettings returns base changed by the parameters in p (see Params): enable (true,
// false, 1 or 0), categories (names, comma-separated, in any case), keyspaces and tables
// (keyspace or keyspace.table names, comma-separated; unquoted names are lower-cased as
// CQL does, "quoted" ones kept as they are) and exclude_users (names, comma-separated). An
// absent parameter leaves its setting as it is; an empty value, or All, clears a list.
// Every parameter is checked before any is applied: on error base is returned unchanged
// with a *ParamError.
func ParseSettings(base Settings, p map[string]string) (Settings, error) {
	s := base
	if v, ok := p["enable"]; ok {
		switch strings.ToLower(v) {
		case "true", "1":
			s.Enabled = true
		case "false", "0":
			s.Enabled = false
		default:
			return base, &ParamError{"enable", v, "true, false, 1 or 0"}
		}
	}
	if v, ok := p["categories"]; ok {
		c, err := parseCategories(v)
		if err != nil {
			return base, err
		}
		s.Categories = c
	}
	for _, l := range []struct {
		name  string
		dst   *map[string]bool
		parse func(string) (string, bool)
		want  string
	}{
		{"keyspaces", &s.Keyspaces, keyspaceName, "keyspace names, comma-separated (letters, digits and _, or \"quoted\"), or * for every keyspace"},
		{"tables", &s.Tables, tableName, "keyspace.table names, comma-separated, or * for every table"},
		{"exclude_users", &s.ExcludeUsers, userName, "user names, comma-separated, or * to exclude none"},
	} {
		v, ok := p[l.name]
		if !ok {
			continue
		}
		set, ok := parseList(v, l.parse)
		if !ok {
			return base, &ParamError{l.name, v, l.want}
		}
		*l.dst = set
	}
	return s, nil
}

// parseCategories parses a comma-separated list of category names.
func parseCategories(v string) (uint8, error) {
	var c uint8
	for _, name := range strings.Split(v, ",") {
		cat, ok := ParseCategory(strings.TrimSpace(name))
		if !ok {
			return 0, &ParamError{"categories", v, "category names, comma-separated, of " + strings.Join(categoryNames[1:], ", ")}
		}
		c |= 1 << cat
	}
	return c, nil
}

// ParseCategory parses a category's name, in any case.
func ParseCategory(name string) (Category, bool) {
	for i, n := range categoryNames {
		if i > 0 && strings.EqualFold(n, name) {
			return Category(i), true
		}
	}
	return 0, false
}

// parseList parses a comma-separated list, each element through parse; "" or All is the
// empty list (nil). It reports false when an element is bad, an empty one included.
func parseList(v string, parse func(string) (string, bool)) (map[string]bool, bool) {
	v = strings.TrimSpace(v)
	if v == "" || v == All {
		return nil, true
	}
	set := make(map[string]bool)
	for _, e := range strings.Split(v, ",") {
		name, ok := parse(strings.TrimSpace(e))
		if !ok {
			return nil, false
		}
		set[name] = true
	}
	return set, true
}

// keyspaceName checks a CQL name: letters, digits and _, lower-cased; or "quoted", kept.
func keyspaceName(s string) (string, bool) {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		inner := strings.ReplaceAll(s[1:len(s)-1], `""`, `"`)
		return inner, inner != ""
	}
	if s == "" {
		return "", false
	}
	for _, r := range s {
		if !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return "", false
		}
	}
	return strings.ToLower(s), true
}

// tableName checks keyspace.table.
func tableName(s string) (string, bool) {
	var ks, t string
	if strings.HasPrefix(s, `"`) {
		end := strings.Index(s[1:], `".`)
		if end < 0 {
			return "", false
		}
		ks, t = s[:end+2], s[end+3:]
	} else {
		var ok bool
		if ks, t, ok = strings.Cut(s, "."); !ok {
			return "", false
		}
	}
	k, ok1 := keyspaceName(ks)
	n, ok2 := keyspaceName(t)
	if !ok1 || !ok2 {
		return "", false
	}
	return k + "." + n, true
}

// userName checks a user name: anything but empty.
func userName(s string) (string, bool) { return s, s != "" }

// View is the settings as the API and a handover carry them: names, sorted.
type View struct {
	Enabled      bool     `json:"enable"`
	Categories   []string `json:"categories"`
	Keyspaces    []string `json:"keyspaces"`
	Tables       []string `json:"tables"`
	ExcludeUsers []string `json:"exclude_users"`
}

// View returns s as names.
func (s *Settings) View() View {
	v := View{Enabled: s.Enabled, Categories: []string{}, Keyspaces: sorted(s.Keyspaces), Tables: sorted(s.Tables),
		ExcludeUsers: sorted(s.ExcludeUsers)}
	for c := AUTH; c <= ADMIN; c++ {
		if s.Has(c) {
			v.Categories = append(v.Categories, c.String())
		}
	}
	return v
}

// Settings parses v back, as ParseSettings would its parameters.
func (v View) Settings() (Settings, error) {
	p := map[string]string{"categories": strings.Join(v.Categories, ","), "keyspaces": quoteAll(v.Keyspaces),
		"tables": quoteTables(v.Tables), "exclude_users": strings.Join(v.ExcludeUsers, ",")}
	if len(v.Categories) == 0 {
		delete(p, "categories")
	}
	s, err := ParseSettings(Settings{}, p)
	s.Enabled = v.Enabled
	return s, err
}

// quoteAll joins keyspace names, quoting those that need it to parse back as they are.
func quoteAll(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		if k, ok := keyspaceName(n); ok && k == n {
			out[i] = n
		} else {
			out[i] = cql.QuoteName(n)
		}
	}
	return strings.Join(out, ",")
}

// quoteTables joins keyspace.table names, quoting each part as quoteAll does.
func quoteTables(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		k, t, _ := strings.Cut(n, ".")
		out[i] = quoteAll([]string{k}) + "." + quoteAll([]string{t})
	}
	return strings.Join(out, ",")
}

func sorted(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
