package node

// indexKind is what a secondary index indexes in its column.
type indexKind uint8

const (
	indexSimple  indexKind = iota // the value of a non-collection column
	indexValues                   // a non-frozen collection's values
	indexKeys                     // a map's keys
	indexEntries                  // a map's entries
	indexFull                     // a frozen collection, whole
)

var indexKindNames = [...]string{"", "values", "keys", "entries", "full"}
