package node

// The AST of the supported CQL subset. Identifiers are already case-folded: unquoted names
// are lower case, quoted names keep their case.

type statement interface{ stmtName() string }

type tableName struct{ ks, name string }

type useStmt struct{ keyspace string }

type createKeyspaceStmt struct {
	name        string
	ifNotExists bool
	opts        keyspaceOpts
}

// keyspaceOpts are the WITH options of CREATE and ALTER KEYSPACE; nil means not given.
type keyspaceOpts struct {
	replication   map[string]string
	durableWrites *bool
}

// optValue is the value of a table's WITH option: a constant's text, or a map.
type optValue struct {
	text string
	m    map[string]string
}

type dropKeyspaceStmt struct {
	name     string
	ifExists bool
}

type colDef struct {
	name   string
	ref    *typeRef
	static bool
}

type ordering struct {
	col  string
	desc bool
}

type createTableStmt struct {
	table       tableName
	ifNotExists bool
	cols        []colDef
	pk          []string
	ck          []string
	order       []ordering
	options     map[string]optValue
	compact     bool
}

type dropTableStmt struct {
	table    tableName
	ifExists bool
}

type truncateStmt struct{ table tableName }

type alterKeyspaceStmt struct {
	name     string
	ifExists bool
	opts     keyspaceOpts
}

type alterOp uint8

const (
	alterAdd alterOp = iota
	alterDrop
	alterRename
	alterOptions
	alterType        // ALTER col TYPE t: refused, as in Cassandra 4
	alterDropCompact // DROP COMPACT STORAGE: disabled, as by default in Cassandra 4.1
)

type rename struct{ from, to string }

type createTypeStmt struct {
	name        tableName
	ifNotExists bool
	fields      []colDef
}

type alterTypeStmt struct {
	name     tableName
	ifExists bool
	op       alterOp // alterAdd, alterRename or alterType
	ifField  bool
	add      colDef
	renames  []rename
}

type dropTypeStmt struct {
	name     tableName
	ifExists bool
}

type createIndexStmt struct {
	name        string
	ks          string // the keyspace of a name written ks.name
	ifNotExists bool
	table       tableName
	col         string
	kind        indexKind
	custom      bool
	class       string
}

type dropIndexStmt struct {
	name     tableName
	ifExists bool
}

type createFunctionStmt struct {
	name         tableName
	orReplace    bool
	ifNotExists  bool
	argNames     []string
	argTypes     []*typeRef
	calledOnNull bool
	ret          *typeRef
	language     string
	body         string
}

type createAggregateStmt struct {
	name        tableName
	orReplace   bool
	ifNotExists bool
	argTypes    []*typeRef
	stateFunc   string
	stateType   *typeRef
	finalFunc   string
	initCond    *term
}

// dropFunctionStmt is DROP FUNCTION or DROP AGGREGATE.
type dropFunctionStmt struct {
	aggregate bool
	name      tableName
	ifExists  bool
	args      []*typeRef
	hasArgs   bool
}

// viewStmt is ALTER or DROP MATERIALIZED VIEW.
type viewStmt struct {
	name     tableName
	ifExists bool
	alter    bool                // ALTER ... WITH opts; DROP otherwise
	opts     map[string]optValue // ALTER's options
}

// createViewStmt is CREATE MATERIALIZED VIEW.
type createViewStmt struct {
	name        tableName
	base        tableName
	ifNotExists bool
	star        bool
	cols        []string // the selected columns, without SELECT *
	aliased     string   // a selector with an alias, which 4.1 refuses
	notNull     []string // WHERE col IS NOT NULL, in order
	others      []string // columns with other restrictions, which the node does not filter on
	pk, ck      []string
	order       []ordering
	options     map[string]optValue
}

type alterTableStmt struct {
	table    tableName
	ifExists bool
	op       alterOp
	ifColumn bool // ADD IF NOT EXISTS, DROP IF EXISTS, RENAME IF EXISTS
	add      []colDef
	drop     []string
	ts       *int64 // DROP ... USING TIMESTAMP
	renames  []rename
	opts     map[string]optValue
}

// unsupportedStmt is a statement that parses but that the node rejects with Invalid.
type unsupportedStmt struct{ what string }

type insertStmt struct {
	table       tableName
	cols        []string
	vals        []*term
	json        *term // INSERT JSON: the string or its marker
	jsonUnset   bool  // DEFAULT UNSET
	ifNotExists bool
	ttl, ts     *term
}

type assignOp uint8

const (
	assignSet     assignOp = iota // c = v
	assignAdd                     // c = c + v
	assignSub                     // c = c - v
	assignPrepend                 // c = v + c
	assignKey                     // c[k] = v
)

type assignment struct {
	col   string
	field string // u.f = v, on a non-frozen user type
	op    assignOp
	key   *term
	val   *term
}

type updateStmt struct {
	table    tableName
	ttl, ts  *term
	assigns  []assignment
	where    []relation
	ifExists bool
	conds    []relation
}

type deleteTarget struct {
	col   string
	key   *term  // m[k] or l[i]
	field string // u.f
}

type deleteStmt struct {
	table    tableName
	cols     []deleteTarget
	ts       *term
	where    []relation
	ifExists bool
	conds    []relation
}

type relOp uint8

const (
	opEq relOp = iota
	opLt
	opLe
	opGt
	opGe
	opIn
	opNe
	opContains
	opContainsKey
	opMapEq // m[k] = v
)

var relOpNames = [...]string{"=", "<", "<=", ">", ">=", "IN", "!=", "CONTAINS", "CONTAINS KEY", "="}

type relation struct {
	col   string
	key   *term    // m[k] = v
	cols  []string // token(a, b) arguments
	token bool
	op    relOp
	val   *term   // single value, or the marker of IN ?
	vals  []*term // IN (a, b, c)
}

type selKind uint8

const (
	selColumn selKind = iota
	selCount
	selWritetime
	selTTL
	selToken
	selFunc
	selAgg    // min, max, sum, avg, count(col)
	selToJSON // toJson(col)
	selUDF    // a call of a user-defined function or aggregate
)

type selector struct {
	kind     selKind
	col      string
	fields   []string // u.a.b: field selection
	agg      string   // selAgg: the aggregate's name
	fnKs     string   // selUDF: the function's keyspace, when written ks.f
	cols     []string // token() arguments
	fn       *term    // constant function such as now()
	casts    []string // CAST(… AS type) of the selector's result, innermost first
	argCasts []string // CAST(… AS type) of an aggregate's argument, innermost first
	alias    string
	text     string // the name Cassandra gives the result column when there is no alias
}

type selectStmt struct {
	table          tableName
	star           bool
	distinct       bool
	json           bool
	sels           []selector
	where          []relation
	groupBy        []string
	orderBy        []ordering
	limit          *term
	partLimit      *term
	allowFiltering bool
}

type batchStmt struct {
	typ   byte // 0 logged, 1 unlogged, 2 counter
	ts    *term
	stmts []statement
}

func (*useStmt) stmtName() string            { return "USE" }
func (*createKeyspaceStmt) stmtName() string { return "CREATE KEYSPACE" }
func (*dropKeyspaceStmt) stmtName() string   { return "DROP KEYSPACE" }
func (*createTableStmt) stmtName() string    { return "CREATE TABLE" }
func (*dropTableStmt) stmtName() string      { return "DROP TABLE" }
func (*truncateStmt) stmtName() string       { return "TRUNCATE" }
func (*alterKeyspaceStmt) stmtName() string  { return "ALTER KEYSPACE" }
func (*alterTableStmt) stmtName() string     { return "ALTER TABLE" }
func (*createTypeStmt) stmtName() string     { return "CREATE TYPE" }
func (*alterTypeStmt) stmtName() string      { return "ALTER TYPE" }
func (*dropTypeStmt) stmtName() string       { return "DROP TYPE" }
func (*createIndexStmt) stmtName() string    { return "CREATE INDEX" }
func (*dropIndexStmt) stmtName() string      { return "DROP INDEX" }
func (*viewStmt) stmtName() string           { return "MATERIALIZED VIEW" }
func (*createViewStmt) stmtName() string     { return "CREATE MATERIALIZED VIEW" }
func (*createFunctionStmt) stmtName() string { return "CREATE FUNCTION" }
func (*createAggregateStmt) stmtName() string {
	return "CREATE AGGREGATE"
}
func (*dropFunctionStmt) stmtName() string { return "DROP FUNCTION" }
func (*unsupportedStmt) stmtName() string  { return "UNSUPPORTED" }
func (*insertStmt) stmtName() string       { return "INSERT" }
func (*updateStmt) stmtName() string       { return "UPDATE" }
func (*deleteStmt) stmtName() string       { return "DELETE" }
func (*selectStmt) stmtName() string       { return "SELECT" }
func (*batchStmt) stmtName() string        { return "BATCH" }

type termKind uint8

const (
	termConst termKind = iota
	termBind
	termList
	termSet
	termMap
	termFunc
	termTuple
	termUDT // {field: value, ...}
)

type litKind uint8

const (
	litString litKind = iota
	litInt
	litFloat
	litBool
	litNull
	litHex
	litUUID
	litDuration
)

// literalOf is the literal kind of each constant token.
var literalOf = map[tokKind]litKind{
	tString: litString, tInt: litInt, tFloat: litFloat, tHex: litHex, tUUID: litUUID, tDuration: litDuration,
}

var litNames = [...]string{"STRING", "INTEGER", "FLOAT", "BOOLEAN", "NULL", "HEX", "UUID", "DURATION"}

// term is a value in a statement: a constant, a bind marker, a collection literal or a
// function call.
type term struct {
	kind  termKind
	lit   litKind
	text  string   // constant text (with a leading '-' for negative numbers)
	idx   int      // bind marker index
	name  string   // named marker name, or function name
	elems []*term  // list, set, tuple elements, function arguments, map keys, or UDT values
	vals  []*term  // map values
	names []string // UDT field names
}

// parsedStmt is a parsed statement with its bind markers.
type parsedStmt struct {
	stmt    statement
	markers []string // one per bind marker; the name of a named marker or ""
}
