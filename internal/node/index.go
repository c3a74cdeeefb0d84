package node

// indexKind is what a secondary index indexes in its column.
type indexKind uint8

const (
	indexValues  indexKind = iota // the value of a regular column, or a collection's values
	indexKeys                     // a map's keys
	indexEntries                  // a map's entries
	indexFull                     // a frozen collection, whole
)

// index is a secondary index of a table. It is immutable once published.
type index struct {
	name string
	col  string
	kind indexKind
}
