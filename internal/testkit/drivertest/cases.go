package drivertest

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"
)

// Suite is a list of statements that every driver runs in order, in a keyspace of its own,
// each with the outcome it must give. The suites live in JSON files (Load) so that the
// Python driver (scripts/python_cases.py) and gocql (RunGocqlCases) run the very same ones.
type Suite struct {
	// Keyspace is created (dropped first) before the cases run, and is the sessions'
	// keyspace.
	Keyspace string `json:"keyspace"`
	Cases    []Case `json:"cases"`
}

// Case is one statement and the outcome every driver must report for it.
//
// Want is "ok" for a result without rows; "rows(c1,c2): v,v | v,v" for rows, with values
// in CQL literal style (strings quoted, sets and map entries sorted by their text, user
// types as {field: value} in field order, tuples as (a, b), durations as 1mo2d3ns), and
// " pages=N" when Page is set; "error 0xCODE message" for an error (for AlreadyExists the
// message is "already exists: ks[.table]", all that the Python driver shows of it). A tuple
// column of nulls only is rendered null: gocql cannot tell it from a null tuple.
type Case struct {
	Name string `json:"name"`
	// Query is run as a simple statement when there are no Values, and else prepared.
	Query  string `json:"q"`
	Values []any  `json:"values,omitempty"`
	// Reuse keeps the prepared statement under this key and executes that one again
	// later, instead of preparing anew: what an application does across a schema change.
	Reuse string `json:"reuse,omitempty"`
	// Page is the page size; every page is fetched.
	Page int `json:"page,omitempty"`
	// As runs the statement as another login, "user:password".
	As string `json:"as,omitempty"`
	// Batch, when set, sends these statements in one BATCH message (a logged batch) instead
	// of Query; one with values is prepared.
	Batch []BatchEntry `json:"batch,omitempty"`
	// SleepMS waits this long before the statement: past a TTL, say.
	SleepMS int    `json:"sleep_ms,omitempty"`
	Want    string `json:"want"`
	// OrWant lists other outcomes that are as right as Want, for a value that depends on
	// the clock: ttl() read right after a write USING TTL 100 is 100, or 99 when a second
	// boundary fell between the two statements (Cassandra counts whole seconds too).
	OrWant []string `json:"or_want,omitempty"`
}

// Accepts reports whether got is the outcome the case wants, or one of the others it takes.
func (c Case) Accepts(got string) bool {
	return got == c.Want || slices.Contains(c.OrWant, got)
}

// BatchEntry is one statement of a Case's BATCH message.
type BatchEntry struct {
	Query  string `json:"q"`
	Values []any  `json:"values,omitempty"`
}

// Load reads a suite from a JSON file.
func Load(tb testing.TB, path string) Suite {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	var s Suite
	if err := dec.Decode(&s); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	return s
}

// RunPythonCases runs the suite in path with the Python driver and returns the outcome of
// each case, in order.
func RunPythonCases(tb testing.TB, o Options, path string) []string {
	tb.Helper()
	RequirePython(tb)
	abs, err := filepath.Abs(path)
	if err != nil {
		tb.Fatal(err)
	}
	out := output(tb, o.env(), Python, filepath.Join(scriptsDir(), "python_cases.py"), abs)
	var outcomes []string
	if err := json.Unmarshal(out, &outcomes); err != nil {
		tb.Fatalf("python_cases.py printed no outcomes: %v\n%s", err, out)
	}
	return outcomes
}

// PythonMetadata runs scripts/python_metadata.py, which creates one object of each kind in
// keyspace o.Keyspace and returns, as JSON, what the Python driver's metadata API makes of
// them.
func PythonMetadata(tb testing.TB, o Options) []byte {
	tb.Helper()
	RequirePython(tb)
	return output(tb, o.env(), Python, filepath.Join(scriptsDir(), "python_metadata.py"))
}

// RunGocqlCases runs the suite with gocql and returns the outcome of each case, in order.
func RunGocqlCases(tb testing.TB, o Options, s Suite) []string {
	tb.Helper()
	boot, err := Cluster(o).CreateSession()
	if err != nil {
		tb.Fatalf("gocql connect: %v", err)
	}
	for _, q := range []string{"DROP KEYSPACE IF EXISTS " + s.Keyspace,
		"CREATE KEYSPACE " + s.Keyspace + " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"} {
		if err := boot.Query(q).Exec(); err != nil {
			tb.Fatalf("%s: %v", q, err)
		}
	}
	boot.Close()
	sessions := map[string]*gocql.Session{}
	defer func() {
		for _, s := range sessions {
			s.Close()
		}
	}()
	// A conditional statement runs as gocql's ScanCAS runs it, without skip_metadata: its
	// columns depend on the outcome, and its prepared result metadata is empty.
	session := func(login string, lwt bool) *gocql.Session {
		key := login
		if lwt {
			key += "\x00lwt"
		}
		if sess := sessions[key]; sess != nil {
			return sess
		}
		oo := o
		if login != "" {
			oo.User, oo.Pass, _ = strings.Cut(login, ":")
		}
		c := Cluster(oo)
		c.Keyspace = s.Keyspace
		c.DisableSkipMetadata = lwt
		sess, err := c.CreateSession()
		if err != nil {
			tb.Fatalf("gocql connect as %q: %v", login, err)
		}
		sessions[key] = sess
		return sess
	}
	out := make([]string, len(s.Cases))
	for i, c := range s.Cases {
		time.Sleep(time.Duration(c.SleepMS) * time.Millisecond)
		if c.Batch != nil {
			out[i] = gocqlBatch(session(c.As, true), c)
			continue
		}
		out[i] = gocqlCase(session(c.As, conditional(c.Query)), c)
	}
	return out
}

// gocqlBatch sends a case's BATCH message as gocql's MapExecuteBatchCAS does. gocql decodes
// the first row of the result itself, into a map where a null is a zero value: the suites
// have no null in it.
func gocqlBatch(s *gocql.Session, c Case) string {
	b := s.NewBatch(gocql.LoggedBatch)
	for _, e := range c.Batch {
		vals := make([]any, len(e.Values))
		for i, v := range e.Values {
			vals[i] = goValue(v)
		}
		b.Query(e.Query, vals...)
	}
	first := map[string]any{}
	applied, iter, err := s.MapExecuteBatchCAS(b, first)
	if errors.Is(err, gocql.ErrNotFound) {
		return "ok" // a Void result: gocql finds no row to scan
	}
	if err != nil {
		if iter == nil || len(iter.Columns()) == 0 {
			return errorOutcome(err)
		}
	}
	if iter == nil {
		return "ok"
	}
	cols := iter.Columns()
	if len(cols) == 0 {
		iter.Close()
		return "ok"
	}
	names := make([]string, len(cols))
	vs := make([]string, len(cols))
	for i, col := range cols {
		names[i] = col.Name
		if col.Name == "[applied]" {
			vs[i] = strconv.FormatBool(applied)
		} else {
			vs[i] = renderGo(col.TypeInfo, first[col.Name])
		}
	}
	rows := []string{strings.Join(vs, ",")}
	cells := make([]*rawCell, len(cols))
	dest := make([]any, len(cols))
	for i := range cells {
		cells[i] = &rawCell{}
		dest[i] = cells[i]
	}
	for iter.Scan(dest...) {
		vs := make([]string, len(cells))
		for i, cell := range cells {
			vs[i] = cell.render()
		}
		rows = append(rows, strings.Join(vs, ","))
	}
	if err := iter.Close(); err != nil {
		return errorOutcome(err)
	}
	return "rows(" + strings.Join(names, ",") + "): " + strings.Join(rows, " | ")
}

// gocqlCase runs a case's statement with gocql, page by page when the case sets a page
// size (to count the pages), and returns its outcome.
func gocqlCase(s *gocql.Session, c Case) string {
	vals := make([]any, len(c.Values))
	for i, v := range c.Values {
		vals[i] = goValue(v)
	}
	q := s.Query(c.Query, vals...)
	if c.Page > 0 {
		q = q.PageSize(c.Page)
	}
	var rows []string
	var cols []gocql.ColumnInfo
	pages := 0
	var state []byte
	for {
		if c.Page > 0 {
			q = q.PageState(state) // pages fetched one by one, to count them
		}
		iter := q.Iter()
		pages++
		cols = iter.Columns()
		rows = appendGocqlRows(rows, iter, cols)
		state = iter.PageState()
		if err := iter.Close(); err != nil {
			return errorOutcome(err)
		}
		if c.Page == 0 || len(state) == 0 {
			break
		}
	}
	if len(cols) == 0 {
		return "ok"
	}
	names := make([]string, len(cols))
	for i, col := range cols {
		names[i] = col.Name
	}
	res := "rows(" + strings.Join(names, ",") + "):"
	if len(rows) > 0 {
		res += " " + strings.Join(rows, " | ")
	}
	if c.Page > 0 {
		res += " pages=" + strconv.Itoa(pages)
	}
	return res
}

// appendGocqlRows appends the rendered rows of iter's page, of columns cols, to rows.
func appendGocqlRows(rows []string, iter *gocql.Iter, cols []gocql.ColumnInfo) []string {
	n := 0
	for _, col := range cols {
		if t, ok := col.TypeInfo.(gocql.TupleTypeInfo); ok {
			n += len(t.Elems)
		} else {
			n++
		}
	}
	dest := make([]any, n)
	cells := make([]*rawCell, n)
	for i := range dest {
		cells[i] = &rawCell{}
		dest[i] = cells[i]
	}
	for iter.Scan(dest...) {
		rows = append(rows, renderGocqlRow(cols, cells))
	}
	return rows
}

// renderGocqlRow renders a row of columns cols scanned into cells. gocql splits a tuple
// column into its elements, so that a null tuple looks like one of nulls: both are
// rendered null, by both runners.
func renderGocqlRow(cols []gocql.ColumnInfo, cells []*rawCell) string {
	var vs []string
	j := 0
	for _, col := range cols {
		t, ok := col.TypeInfo.(gocql.TupleTypeInfo)
		if !ok {
			vs = append(vs, cells[j].render())
			j++
			continue
		}
		var parts []string
		null := true
		for range t.Elems {
			parts = append(parts, cells[j].render())
			null = null && cells[j].null
			j++
		}
		if null {
			vs = append(vs, "null")
		} else {
			vs = append(vs, "("+strings.Join(parts, ", ")+")")
		}
	}
	return strings.Join(vs, ",")
}

// conditional reports whether a statement is a lightweight transaction (or a batch, which
// may hold one).
func conditional(q string) bool {
	u := " " + strings.ToUpper(strings.Join(strings.Fields(q), " ")) + " "
	return strings.Contains(u, " IF ") || strings.HasPrefix(u, " BEGIN ")
}

func errorOutcome(err error) string {
	var exists *gocql.RequestErrAlreadyExists
	if errors.As(err, &exists) {
		name := exists.Keyspace
		if exists.Table != "" {
			name += "." + exists.Table
		}
		return "error 0x2400 already exists: " + name
	}
	var re gocql.RequestError
	if errors.As(err, &re) {
		return fmt.Sprintf("error 0x%04x %s", re.Code(), re.Message())
	}
	return "driver error: " + err.Error()
}

// goValue converts a JSON value of a case to what gocql binds: integers to int64, other
// numbers to float64, {"$udt": {...}} to a map of fields, {"$duration": [months, days,
// nanoseconds]} to a gocql.Duration, lists and maps element-wise.
func goValue(v any) any {
	switch v := v.(type) {
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return n
		}
		f, _ := v.Float64()
		return f
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = goValue(e)
		}
		return out
	case map[string]any:
		if u, ok := v["$udt"].(map[string]any); ok && len(v) == 1 {
			return goValue(u)
		}
		if d, ok := v["$duration"].([]any); ok && len(v) == 1 && len(d) == 3 {
			n := make([]int64, 3)
			for i, e := range d {
				n[i], _ = e.(json.Number).Int64()
			}
			return gocql.Duration{Months: int32(n[0]), Days: int32(n[1]), Nanoseconds: n[2]}
		}
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = goValue(e)
		}
		return out
	}
	return v
}

// rawCell receives one cell as gocql hands it over, so that nulls, user types and tuples
// are rendered from what the node sent; gocql decodes everything else.
type rawCell struct {
	info gocql.TypeInfo
	data []byte
	null bool
}

// UnmarshalCQL implements gocql.Unmarshaler.
func (c *rawCell) UnmarshalCQL(info gocql.TypeInfo, data []byte) error {
	c.info, c.data, c.null = info, slices.Clone(data), data == nil
	return nil
}

func (c *rawCell) render() string {
	if c.null || c.info == nil {
		return "null"
	}
	return renderCQL(c.info, c.data)
}

// renderCQL renders a serialized value of type info.
func renderCQL(info gocql.TypeInfo, data []byte) string {
	if data == nil {
		return "null"
	}
	if u, ok := info.(gocql.UDTTypeInfo); ok {
		// A value written before ALTER TYPE ADD has fewer fields: the rest are null, as the
		// Python driver shows them.
		var parts []string
		for _, f := range u.Elements {
			if len(data) < 4 {
				parts = append(parts, f.Name+": null")
				continue
			}
			n := int32(binary.BigEndian.Uint32(data))
			data = data[4:]
			var v []byte
			if n >= 0 && int(n) <= len(data) {
				v, data = data[:n], data[n:]
			}
			parts = append(parts, f.Name+": "+renderCQL(f.Type, v))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	if t, ok := info.(gocql.TupleTypeInfo); ok {
		var parts []string
		for _, e := range t.Elems {
			if len(data) < 4 {
				break
			}
			n := int32(binary.BigEndian.Uint32(data))
			data = data[4:]
			var v []byte
			if n >= 0 && int(n) <= len(data) {
				v, data = data[:n], data[n:]
			}
			parts = append(parts, renderCQL(e, v))
		}
		return "(" + strings.Join(parts, ", ") + ")"
	}
	if c, ok := info.(gocql.CollectionType); ok && (tupleLike(c.Elem) || c.Key != nil && tupleLike(c.Key)) {
		// gocql decodes a null field of a user type in a collection as a zero value:
		// split the collection here, so that its user types are rendered as above.
		return renderCollection(c, data)
	}
	ptr := info.New()
	if err := gocql.Unmarshal(info, data, ptr); err != nil {
		return "!" + err.Error()
	}
	return renderGo(info, reflect.ValueOf(ptr).Elem().Interface())
}

func tupleLike(t gocql.TypeInfo) bool {
	switch t.(type) {
	case gocql.UDTTypeInfo, gocql.TupleTypeInfo:
		return true
	}
	return false
}

func renderCollection(c gocql.CollectionType, data []byte) string {
	if len(data) < 4 {
		return "!short collection"
	}
	n := int(binary.BigEndian.Uint32(data))
	data = data[4:]
	next := func() []byte {
		if len(data) < 4 {
			return nil
		}
		l := int32(binary.BigEndian.Uint32(data))
		data = data[4:]
		if l < 0 || int(l) > len(data) {
			return nil
		}
		v := data[:l]
		data = data[l:]
		return v
	}
	parts := make([]string, 0, n)
	for i := 0; i < n; i++ {
		if c.Type() == gocql.TypeMap {
			k := renderCQL(c.Key, next())
			parts = append(parts, k+": "+renderCQL(c.Elem, next()))
		} else {
			parts = append(parts, renderCQL(c.Elem, next()))
		}
	}
	if c.Type() == gocql.TypeList {
		return "[" + strings.Join(parts, ", ") + "]"
	}
	slices.Sort(parts)
	return "{" + strings.Join(parts, ", ") + "}"
}

// renderGo renders a value gocql decoded for type info.
func renderGo(info gocql.TypeInfo, v any) string {
	if c, ok := info.(gocql.CollectionType); ok {
		rv := reflect.ValueOf(v)
		var parts []string
		switch info.Type() {
		case gocql.TypeMap:
			for _, k := range rv.MapKeys() {
				parts = append(parts, renderGo(c.Key, k.Interface())+": "+renderGo(c.Elem, rv.MapIndex(k).Interface()))
			}
			slices.Sort(parts)
			return "{" + strings.Join(parts, ", ") + "}"
		case gocql.TypeSet:
			for i := 0; i < rv.Len(); i++ {
				parts = append(parts, renderGo(c.Elem, rv.Index(i).Interface()))
			}
			slices.Sort(parts)
			return "{" + strings.Join(parts, ", ") + "}"
		}
		for i := 0; i < rv.Len(); i++ {
			parts = append(parts, renderGo(c.Elem, rv.Index(i).Interface()))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	if u, ok := info.(gocql.UDTTypeInfo); ok {
		m, _ := v.(map[string]any)
		var parts []string
		for _, f := range u.Elements {
			parts = append(parts, f.Name+": "+renderGo(f.Type, m[f.Name]))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	switch v := v.(type) {
	case string:
		return "'" + v + "'"
	case []byte:
		return fmt.Sprintf("0x%x", v)
	case float32:
		return strconv.FormatFloat(float64(v), 'g', -1, 64)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case time.Time:
		if info.Type() == gocql.TypeDate {
			return v.UTC().Format("2006-01-02")
		}
		return v.UTC().Format("2006-01-02T15:04:05.000Z")
	case time.Duration:
		return strconv.FormatInt(int64(v), 10)
	case gocql.Duration:
		return fmt.Sprintf("%dmo%dd%dns", v.Months, v.Days, v.Nanoseconds)
	case net.IP:
		return v.String()
	case fmt.Stringer: // *big.Int, *inf.Dec, gocql.UUID
		return v.String()
	case nil:
		return "null"
	}
	return fmt.Sprint(v)
}
