package main

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tracecar/tracecar/loadcheck"
)

// referenceFile is the reference that TestReference checks against the code.
const referenceFile = "docs/reference.md"

// writeReferenceEnv, set to 1, makes TestReference rewrite the reference's rows instead of
// checking them: a row the code has and the reference lacks is added, with its description
// taken from the code (the flag's usage, the metric's HELP, the field's comment), and a
// stale one is removed; rows that stay keep their text.
const writeReferenceEnv = "TRACECAR_WRITE_REFERENCE"

// refItem is one row of the reference: its key (the first cell, without backticks) and
// the row the code would give it.
type refItem struct {
	key, row string
}

// refSection is a table of the reference: the heading it sits under, its header, and the
// items the code has.
type refSection struct {
	heading string
	header  string
	items   []refItem
	// known reports whether a documented key that the code did not list still exists
	// (a metric that only appears under load, say); nil means no.
	known func(key string) bool
	// what the code calls it, and where it comes from, for the failure messages.
	kind, source string
}

// TestReference checks docs/reference.md against the code: every flag that `tracecar
// sidecar -h`, `node -h`, `loadcheck -h`, `ctl -h` and `capture -h` print, every route the
// sidecar's admin API and the embedded node's API serve, every tracecar_ metric of their
// /metrics, and every field of loadcheck's --json report has a row, and every row names one
// that exists. With TRACECAR_WRITE_REFERENCE=1 it rewrites the rows instead.
func TestReference(t *testing.T) {
	sections := append(flagSections(t), routeSection(t), metricSection(t), jsonSection(t))
	text := readDoc(t, referenceFile)
	if os.Getenv(writeReferenceEnv) == "1" {
		out := rewriteReference(t, text, sections)
		if err := os.WriteFile(filepath.Join(repoRoot, referenceFile), []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	// Each field of loadcheck's JSON has a description of its own: two fields of one object
	// that share one have had a comment pasted (issue 59: op_rate, cpu_s and others carried
	// the comment of unsent or of the paired figures).
	t.Run("loadcheck JSON descriptions", func(t *testing.T) {
		byDesc := map[string]string{}
		for key, row := range referenceRows(t, text, "## loadcheck JSON") {
			cells := strings.Split(row, " | ")
			parent := key[:strings.LastIndex(key, ".")+1]
			k := parent + "\x00" + cells[len(cells)-1]
			if other, ok := byDesc[k]; ok {
				t.Errorf("%s: %s and %s share one description; give each its own: %s", referenceFile, other, key, cells[len(cells)-1])
			}
			byDesc[k] = key
		}
	})
	for _, s := range sections {
		t.Run(s.heading, func(t *testing.T) {
			documented := referenceRows(t, text, s.heading)
			have := map[string]bool{}
			for _, it := range s.items {
				have[it.key] = true
				if _, ok := documented[it.key]; !ok {
					t.Errorf("%s: %s %s (%s) has no row under %q: add\n\t%s\n(or run %s=1 go test ./cmd/tracecar -run TestReference, then edit its description)",
						referenceFile, s.kind, it.key, s.source, s.heading, it.row, writeReferenceEnv)
				}
			}
			for key := range documented {
				if !have[key] && (s.known == nil || !s.known(key)) {
					t.Errorf("%s: the row of %s %s under %q names one that %s no longer has: remove it",
						referenceFile, s.kind, key, s.heading, s.source)
				}
			}
		})
	}
}

var refKey = regexp.MustCompile("^\\| `([^`]+)`")

// referenceRows returns the rows of the table under heading in text, by key.
func referenceRows(tb testing.TB, text, heading string) map[string]string {
	tb.Helper()
	_, rest, ok := strings.Cut("\n"+text, "\n"+heading+"\n")
	if !ok {
		tb.Fatalf("%s has no heading %q", referenceFile, heading)
	}
	rows := map[string]string{}
	for _, l := range strings.Split(rest, "\n") {
		if n, _ := headingOf(l); n > 0 {
			break
		}
		if m := refKey.FindStringSubmatch(l); m != nil {
			rows[m[1]] = l
		}
	}
	return rows
}

// rewriteReference replaces the table under each section's heading with one row per item:
// the documented row when there is one, else the item's own.
func rewriteReference(tb testing.TB, text string, sections []refSection) string {
	tb.Helper()
	for _, s := range sections {
		documented := referenceRows(tb, text, s.heading)
		var rows []string
		for _, it := range s.items {
			if r, ok := documented[it.key]; ok {
				rows = append(rows, r)
			} else {
				rows = append(rows, it.row)
			}
		}
		for key, r := range documented {
			if !slices.ContainsFunc(s.items, func(it refItem) bool { return it.key == key }) && s.known != nil && s.known(key) {
				rows = append(rows, r)
			}
		}
		table := s.header + "\n" + strings.Join(rows, "\n") + "\n"
		before, rest, ok := strings.Cut(text, s.heading+"\n")
		if !ok {
			text += "\n" + s.heading + "\n\n" + table
			continue
		}
		// The section's text up to its table stays; the table is replaced.
		lines := strings.Split(rest, "\n")
		start, end := -1, len(lines)
		for i, l := range lines {
			if n, _ := headingOf(l); n > 0 {
				end = i
				break
			}
			if strings.HasPrefix(l, "|") && start < 0 {
				start = i
			}
			if start >= 0 && !strings.HasPrefix(l, "|") {
				end = i
				break
			}
		}
		var out []string
		if start < 0 {
			out = append(append(lines[:end:end], strings.Split(table, "\n")...), lines[end:]...)
		} else {
			out = append(append(lines[:start:start], strings.Split(strings.TrimSuffix(table, "\n"), "\n")...), lines[end:]...)
		}
		text = before + s.heading + "\n" + strings.Join(out, "\n")
	}
	return text
}

// cell makes s fit in a table cell.
func cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(s, "|", "\\|")
}

// helpOf returns what `tracecar args…` prints, on stdout and stderr.
func helpOf(tb testing.TB, args ...string) string {
	tb.Helper()
	var out strings.Builder
	run(context.Background(), args, &out, &out)
	return out.String()
}

var (
	defaultsFlag = regexp.MustCompile(`^  -([A-Za-z0-9][A-Za-z0-9-]*)(?: (.*))?$`)
	usageFlag    = regexp.MustCompile(`[\[|] ?--([a-z][a-z0-9-]*)(?: ([A-Z][A-Z0-9:./_-]*|[0-9][0-9a-zA-Z.]*|[a-z0-9_|]+\|[a-z0-9_|]+))?`)
)

// flagSections lists the flags each command prints with -h: as flag.PrintDefaults writes
// them, or, for a command that prints a usage of its own (ctl, capture), every --flag in
// brackets ("[--limit 20]", "[--enable|--disable]") of it.
func flagSections(tb testing.TB) []refSection {
	tb.Helper()
	var out []refSection
	for _, cmd := range []string{"sidecar", "node", "loadcheck", "ctl", "capture"} {
		help := helpOf(tb, cmd, "-h")
		s := refSection{
			heading: "### tracecar " + cmd,
			header:  "| flag | argument | what it does |\n|---|---|---|",
			kind:    "flag",
			source:  "`tracecar " + cmd + " -h`",
		}
		seen := map[string]bool{}
		add := func(name, arg, usage string) {
			if seen["--"+name] {
				return
			}
			seen["--"+name] = true
			s.items = append(s.items, refItem{"--" + name, fmt.Sprintf("| `--%s` | %s | %s |", name, cell(arg), cell(usage))})
		}
		lines := strings.Split(help, "\n")
		printsDefaults := false
		for i, l := range lines {
			if m := defaultsFlag.FindStringSubmatch(l); m != nil {
				printsDefaults = true
				var usage []string
				for j := i + 1; j < len(lines) && strings.HasPrefix(lines[j], "    \t"); j++ {
					usage = append(usage, strings.TrimSpace(lines[j]))
				}
				add(m[1], m[2], strings.Join(usage, " "))
			}
		}
		if !printsDefaults {
			for _, l := range lines {
				for _, m := range usageFlag.FindAllStringSubmatch(l, -1) {
					add(m[1], m[2], strings.TrimSpace(l))
				}
			}
		}
		if len(s.items) == 0 {
			tb.Fatalf("tracecar %s -h lists no flags:\n%s", cmd, help)
		}
		out = append(out, s)
	}
	return out
}

// routeSection lists the routes of the sidecar's admin API and of the embedded node's API,
// each with every option that adds routes. A path that takes one more segment (Route.Path
// ending in "/") is written with the segment's name in braces: /system/logger/{name}.
func routeSection(tb testing.TB) refSection {
	tb.Helper()
	st := mustStack(tb, stackConfig{CaptureDir: tb.TempDir()})
	inSource := namedInSource(tb)
	servers := map[string][]string{}
	var keys []string
	for _, srv := range []struct {
		name   string
		routes func() []string
	}{
		{"sidecar", func() (out []string) {
			for _, r := range st.api.Routes() {
				out = append(out, r.Method+" "+r.Path)
			}
			return out
		}},
		{"node", func() (out []string) {
			for _, r := range st.nodeAPI.Routes() {
				out = append(out, r.Method+" "+r.Path)
			}
			return out
		}},
	} {
		for _, r := range srv.routes() {
			if servers[r] == nil {
				keys = append(keys, r)
			}
			servers[r] = append(servers[r], srv.name)
		}
	}
	s := refSection{
		heading: "## Admin API",
		header:  "| route | served by | parameters | answer and errors |\n|---|---|---|---|",
		kind:    "route",
		source:  "the admin API (admin.Server.Routes of the sidecar and of the embedded node)",
		// A route served only with a flag (the node's --allow-node-control) is known
		// while the admin package still names its path.
		known: func(key string) bool {
			_, path, _ := strings.Cut(key, " ")
			return inSource(path)
		},
	}
	for _, k := range keys {
		s.items = append(s.items, refItem{k, fmt.Sprintf("| `%s` | %s | | |", k, strings.Join(servers[k], ", "))})
	}
	// A route that takes one more segment is documented as /prefix/{name}, with a name
	// of the reference's choosing ({name} when it has none yet).
	param := regexp.MustCompile(`\{[a-z_]*\}$`)
	documented := referenceRows(tb, readDoc(tb, referenceFile), s.heading)
	for i, it := range s.items {
		if !strings.HasSuffix(it.key, "/") {
			continue
		}
		key := it.key + "{name}"
		for k := range documented {
			if param.ReplaceAllString(k, "") == it.key {
				key = k
			}
		}
		s.items[i] = refItem{key, strings.Replace(it.row, "`"+it.key+"`", "`"+key+"`", 1)}
	}
	return s
}

// metricSection lists the tracecar_ metrics that the sidecar's and the node's /metrics
// serve, after traffic recorded in full mode with statement statistics on. A documented
// metric that these scrapes lack is known when the code still names it, in a string of a
// non-test Go file: some appear only under conditions (a handover, a guardrail step).
func metricSection(tb testing.TB) refSection {
	tb.Helper()
	st := mustStack(tb, stackConfig{CaptureDir: tb.TempDir()})
	for _, p := range []string{"/storage_service/slow_query?enable=true&fast=false&threshold=0", "/tracecar/statement_stats?enable=true"} {
		req, _ := http.NewRequest("POST", st.Admin+p, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}
	s := mustSession(tb, st.Sidecar)
	for range 10 {
		var rv string
		s.Query("SELECT release_version FROM system.local WHERE key = ?", "local").Scan(&rv)
	}
	s.Query("SELECT * FROM system.local").Iter().Close() // unprepared, for the anti-patterns
	s.Close()
	families := map[string]string{}
	var names []string
	for _, base := range []string{st.Admin, st.NodeAPI} {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			tb.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
		if err != nil {
			tb.Fatalf("%s/metrics: %v", base, err)
		}
		for name, f := range fams {
			if !strings.HasPrefix(name, "tracecar_") {
				continue
			}
			if _, ok := families[name]; !ok {
				names = append(names, name)
			}
			families[name] = fmt.Sprintf("| `%s` | %s | %s |", name, strings.ToLower(f.GetType().String()), cell(f.GetHelp()))
		}
	}
	slices.Sort(names)
	sec := refSection{
		heading: "## Metrics",
		header:  "| metric | type | what it counts |\n|---|---|---|",
		kind:    "metric",
		source:  "/metrics of the sidecar and of the embedded node",
		known:   namedInSource(tb),
	}
	for _, n := range names {
		sec.items = append(sec.items, refItem{n, families[n]})
	}
	return sec
}

// namedInSource reports whether a name is a string in a non-test Go file of the module.
func namedInSource(tb testing.TB) func(string) bool {
	tb.Helper()
	var src strings.Builder
	filepath.WalkDir(repoRoot, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() && (d.Name() == ".git" || d.Name() == "tools") {
			if d != nil && d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			b, _ := os.ReadFile(p)
			src.Write(b)
		}
		return nil
	})
	all := src.String()
	return func(name string) bool { return strings.Contains(all, `"`+name+`"`) }
}

// jsonSection lists the fields of loadcheck's --json report, as dotted paths: a slice's
// elements are name[], a map's values name{}.
func jsonSection(tb testing.TB) refSection {
	tb.Helper()
	docs := fieldDocs(tb, filepath.Join(repoRoot, "loadcheck"))
	s := refSection{
		heading: "## loadcheck JSON",
		header:  "| field | type | what it holds |\n|---|---|---|",
		kind:    "JSON field",
		source:  "loadcheck.Report's JSON tags",
	}
	var walk func(t reflect.Type, prefix string, path []reflect.Type)
	walk = func(t reflect.Type, prefix string, path []reflect.Type) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t.PkgPath() == "time" || slices.Contains(path, t) {
			return
		}
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			name, _, _ := strings.Cut(tag, ",")
			if name == "-" || !f.IsExported() {
				continue
			}
			if name == "" {
				if f.Anonymous {
					walk(f.Type, prefix, append(path, t))
					continue
				}
				name = f.Name
			}
			key := prefix + name
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			typ := jsonType(ft)
			s.items = append(s.items, refItem{key, fmt.Sprintf("| `%s` | %s | %s |", key, typ, cell(docs[t.Name()+"."+f.Name]))})
			switch ft.Kind() {
			case reflect.Slice, reflect.Array:
				walk(ft.Elem(), key+"[].", append(path, t))
			case reflect.Map:
				walk(ft.Elem(), key+"{}.", append(path, t))
			default:
				walk(ft, key+".", append(path, t))
			}
		}
	}
	walk(reflect.TypeFor[loadcheck.Report](), "", nil)
	return s
}

// jsonType names t as JSON would.
func jsonType(t reflect.Type) string {
	if t.PkgPath() == "time" && t.Name() == "Time" {
		return "string (RFC 3339)"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "boolean"
	case reflect.String:
		return "string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		if t.String() == "time.Duration" {
			return "number (ns)"
		}
		return "number"
	case reflect.Slice, reflect.Array:
		return "array of " + jsonType(t.Elem())
	case reflect.Map:
		return "object of " + jsonType(t.Elem())
	case reflect.Pointer:
		return jsonType(t.Elem())
	}
	return "object"
}

// fieldDocs returns the comments of the struct fields of the package in dir, by
// Type.Field.
func fieldDocs(tb testing.TB, dir string) map[string]string {
	tb.Helper()
	fset := token.NewFileSet()
	out := map[string]string{}
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, p := range files {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			tb.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return true
			}
			// A comment above several fields is theirs, until the next comment or a blank
			// line, unless it names the first field (Go's "Name is …"): then it is that
			// field's own, and the fields after it have none, rather than one pasted.
			var group string
			prevEnd := 0
			for _, fld := range st.Fields.List {
				doc := ""
				if fset.Position(fld.Pos()).Line > prevEnd+1 && fld.Doc == nil {
					group = ""
				}
				prevEnd = fset.Position(fld.End()).Line
				if fld.Doc != nil {
					group = fld.Doc.Text()
					doc = group
					if len(fld.Names) > 0 && strings.HasPrefix(group, fld.Names[0].Name+" ") {
						group = ""
					}
				} else if fld.Comment == nil {
					doc = group
				}
				if fld.Comment != nil {
					doc = fld.Comment.Text()
				}
				for _, name := range fld.Names {
					out[ts.Name.Name+"."+name.Name] = doc
				}
			}
			return true
		})
	}
	return out
}
