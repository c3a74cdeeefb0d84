package grammar

// indexKind is what a secondary index indexes in its column.
type IndexKind uint8

const (
	IndexSimple  IndexKind = iota // the value of a non-collection column
	IndexValues                   // a non-frozen collection's values
	IndexKeys                     // a map's keys
	IndexEntries                  // a map's entries
	IndexFull                     // a frozen collection, whole
)

var IndexKindNames = [...]string{"", "values", "keys", "entries", "full"}
