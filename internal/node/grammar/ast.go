package grammar

// The AST of the supported CQL subset. Identifiers are already case-folded: unquoted names
// are lower case, quoted names keep their case.

type Statement interface{ StmtName() string }

type TableName struct{ Ks, Name string }

type UseStmt struct{ Keyspace string }

type CreateKeyspaceStmt struct {
	Name        string
	IfNotExists bool
	Opts        keyspaceOpts
}

// keyspaceOpts are the WITH options of CREATE and ALTER KEYSPACE; nil means not given.
type keyspaceOpts struct {
	Replication   map[string]string
	DurableWrites *bool
}

// optValue is the value of a table's WITH option: a constant's text, or a map.
type OptValue struct {
	Text string
	M    map[string]string
}

type DropKeyspaceStmt struct {
	Name     string
	IfExists bool
}

type ColDef struct {
	Name   string
	Ref    *TypeRef
	Static bool
}

type ordering struct {
	Col  string
	Desc bool
}

type CreateTableStmt struct {
	Table       TableName
	IfNotExists bool
	Cols        []ColDef
	Pk          []string
	Ck          []string
	Order       []ordering
	Options     map[string]OptValue
	Compact     bool
}

type DropTableStmt struct {
	Table    TableName
	IfExists bool
}

type TruncateStmt struct{ Table TableName }

type AlterKeyspaceStmt struct {
	Name     string
	IfExists bool
	Opts     keyspaceOpts
}

type alterOp uint8

const (
	AlterAdd alterOp = iota
	AlterDrop
	AlterRename
	AlterOptions
	AlterType        // ALTER col TYPE t: refused, as in Cassandra 4
	AlterDropCompact // DROP COMPACT STORAGE: disabled, as by default in Cassandra 4.1
)

type rename struct{ From, To string }

type CreateTypeStmt struct {
	Name        TableName
	IfNotExists bool
	Fields      []ColDef
}

type AlterTypeStmt struct {
	Name     TableName
	IfExists bool
	Op       alterOp // alterAdd, alterRename or alterType
	IfField  bool
	Add      ColDef
	Renames  []rename
}

type DropTypeStmt struct {
	Name     TableName
	IfExists bool
}

type CreateIndexStmt struct {
	Name        string
	Ks          string // the keyspace of a name written ks.name
	IfNotExists bool
	Table       TableName
	Col         string
	Kind        IndexKind
	Custom      bool
	Class       string
}

type DropIndexStmt struct {
	Name     TableName
	IfExists bool
}

type CreateFunctionStmt struct {
	Name         TableName
	OrReplace    bool
	IfNotExists  bool
	ArgNames     []string
	ArgTypes     []*TypeRef
	CalledOnNull bool
	Ret          *TypeRef
	Language     string
	Body         string
}

type CreateAggregateStmt struct {
	Name        TableName
	OrReplace   bool
	IfNotExists bool
	ArgTypes    []*TypeRef
	StateFunc   string
	StateType   *TypeRef
	FinalFunc   string
	InitCond    *Term
}

// dropFunctionStmt is DROP FUNCTION or DROP AGGREGATE.
type DropFunctionStmt struct {
	Aggregate bool
	Name      TableName
	IfExists  bool
	Args      []*TypeRef
	HasArgs   bool
}

// viewStmt is ALTER or DROP MATERIALIZED VIEW.
type ViewStmt struct {
	Name     TableName
	IfExists bool
	Alter    bool                // ALTER ... WITH opts; DROP otherwise
	Opts     map[string]OptValue // ALTER's options
}

// createViewStmt is CREATE MATERIALIZED VIEW.
type CreateViewStmt struct {
	Name        TableName
	Base        TableName
	IfNotExists bool
	Star        bool
	Cols        []string // the selected columns, without SELECT *
	Aliased     string   // a selector with an alias, which 4.1 refuses
	NotNull     []string // WHERE col IS NOT NULL, in order
	Others      []string // columns with other restrictions, which the node does not filter on
	Pk, Ck      []string
	Order       []ordering
	Options     map[string]OptValue
}

type AlterTableStmt struct {
	Table    TableName
	IfExists bool
	Op       alterOp
	IfColumn bool // ADD IF NOT EXISTS, DROP IF EXISTS, RENAME IF EXISTS
	Add      []ColDef
	Drop     []string
	Ts       *int64 // DROP ... USING TIMESTAMP
	Renames  []rename
	Opts     map[string]OptValue
}

// unsupportedStmt is a statement that parses but that the node rejects with Invalid.
type UnsupportedStmt struct{ What string }

type InsertStmt struct {
	Table       TableName
	Cols        []string
	Vals        []*Term
	Json        *Term // INSERT JSON: the string or its marker
	JsonUnset   bool  // DEFAULT UNSET
	IfNotExists bool
	Ttl, Ts     *Term
}

type AssignOp uint8

const (
	AssignSet     AssignOp = iota // c = v
	AssignAdd                     // c = c + v
	AssignSub                     // c = c - v
	AssignPrepend                 // c = v + c
	AssignKey                     // c[k] = v
)

type assignment struct {
	Col   string
	Field string // u.f = v, on a non-frozen user type
	Op    AssignOp
	Key   *Term
	Val   *Term
}

type UpdateStmt struct {
	Table    TableName
	Ttl, Ts  *Term
	Assigns  []assignment
	Where    []Relation
	IfExists bool
	Conds    []Relation
}

type deleteTarget struct {
	Col   string
	Key   *Term  // m[k] or l[i]
	Field string // u.f
}

type DeleteStmt struct {
	Table    TableName
	Cols     []deleteTarget
	Ts       *Term
	Where    []Relation
	IfExists bool
	Conds    []Relation
}

type RelOp uint8

const (
	OpEq RelOp = iota
	OpLt
	OpLe
	OpGt
	OpGe
	OpIn
	OpNe
	OpContains
	OpContainsKey
	OpMapEq // m[k] = v
)

var RelOpNames = [...]string{"=", "<", "<=", ">", ">=", "IN", "!=", "CONTAINS", "CONTAINS KEY", "="}

type Relation struct {
	Col   string
	Key   *Term    // m[k] = v
	Cols  []string // token(a, b) arguments
	Token bool
	Op    RelOp
	Val   *Term   // single value, or the marker of IN ?
	Vals  []*Term // IN (a, b, c)
}

type selKind uint8

const (
	SelColumn selKind = iota
	SelCount
	SelWritetime
	SelTTL
	SelToken
	SelFunc
	SelAgg    // min, max, sum, avg, count(col)
	SelToJSON // toJson(col)
	SelUDF    // a call of a user-defined function or aggregate
)

type Selector struct {
	Kind     selKind
	Col      string
	Fields   []string // u.a.b: field selection
	Agg      string   // selAgg: the aggregate's name
	FnKs     string   // selUDF: the function's keyspace, when written ks.f
	Cols     []string // token() arguments
	Fn       *Term    // constant function such as now()
	Casts    []string // CAST(… AS type) of the selector's result, innermost first
	ArgCasts []string // CAST(… AS type) of an aggregate's argument, innermost first
	Alias    string
	Text     string // the name Cassandra gives the result column when there is no alias
}

type SelectStmt struct {
	Table          TableName
	Star           bool
	Distinct       bool
	Json           bool
	Sels           []Selector
	Where          []Relation
	GroupBy        []string
	OrderBy        []ordering
	Limit          *Term
	PartLimit      *Term
	AllowFiltering bool
}

type BatchStmt struct {
	typ   byte // 0 logged, 1 unlogged, 2 counter
	Ts    *Term
	Stmts []Statement
}

func (*UseStmt) StmtName() string            { return "USE" }
func (*CreateKeyspaceStmt) StmtName() string { return "CREATE KEYSPACE" }
func (*DropKeyspaceStmt) StmtName() string   { return "DROP KEYSPACE" }
func (*CreateTableStmt) StmtName() string    { return "CREATE TABLE" }
func (*DropTableStmt) StmtName() string      { return "DROP TABLE" }
func (*TruncateStmt) StmtName() string       { return "TRUNCATE" }
func (*AlterKeyspaceStmt) StmtName() string  { return "ALTER KEYSPACE" }
func (*AlterTableStmt) StmtName() string     { return "ALTER TABLE" }
func (*CreateTypeStmt) StmtName() string     { return "CREATE TYPE" }
func (*AlterTypeStmt) StmtName() string      { return "ALTER TYPE" }
func (*DropTypeStmt) StmtName() string       { return "DROP TYPE" }
func (*CreateIndexStmt) StmtName() string    { return "CREATE INDEX" }
func (*DropIndexStmt) StmtName() string      { return "DROP INDEX" }
func (*ViewStmt) StmtName() string           { return "MATERIALIZED VIEW" }
func (*CreateViewStmt) StmtName() string     { return "CREATE MATERIALIZED VIEW" }
func (*CreateFunctionStmt) StmtName() string { return "CREATE FUNCTION" }
func (*CreateAggregateStmt) StmtName() string {
	return "CREATE AGGREGATE"
}
func (*DropFunctionStmt) StmtName() string { return "DROP FUNCTION" }
func (*UnsupportedStmt) StmtName() string  { return "UNSUPPORTED" }
func (*InsertStmt) StmtName() string       { return "INSERT" }
func (*UpdateStmt) StmtName() string       { return "UPDATE" }
func (*DeleteStmt) StmtName() string       { return "DELETE" }
func (*SelectStmt) StmtName() string       { return "SELECT" }
func (*BatchStmt) StmtName() string        { return "BATCH" }

type termKind uint8

const (
	TermConst termKind = iota
	TermBind
	TermList
	TermSet
	TermMap
	TermFunc
	TermTuple
	TermUDT // {field: value, ...}
)

type LitKind uint8

const (
	LitString LitKind = iota
	LitInt
	LitFloat
	LitBool
	LitNull
	LitHex
	LitUUID
	LitDuration
)

// literalOf is the literal kind of each constant token.
var literalOf = map[tokKind]LitKind{
	tString: LitString, tInt: LitInt, tFloat: LitFloat, tHex: LitHex, tUUID: LitUUID, tDuration: LitDuration,
}

var LitNames = [...]string{"STRING", "INTEGER", "FLOAT", "BOOLEAN", "NULL", "HEX", "UUID", "DURATION"}

// term is a value in a statement: a constant, a bind marker, a collection literal or a
// function call.
type Term struct {
	Kind  termKind
	Lit   LitKind
	Text  string   // constant text (with a leading '-' for negative numbers)
	Idx   int      // bind marker index
	Name  string   // named marker name, or function name
	Elems []*Term  // list, set, tuple elements, function arguments, map keys, or UDT values
	Vals  []*Term  // map values
	Names []string // UDT field names
}

// parsedStmt is a parsed statement with its bind markers.
type ParsedStmt struct {
	Stmt    Statement
	Markers []string // one per bind marker; the name of a named marker or ""
}
