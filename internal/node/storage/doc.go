// Package storage holds the embedded node's schema and data: keyspaces, tables and their
// types, the partitions, rows and cells of each table, the materialized views a write
// maintains, and the memory the tables hold.
//
// # Layers
//
// Each file points only at the files below it (TestNodeFilesPointDown):
//
//   - viewdata.go: a write to a base table of views, and the view rows it replaces.
//   - storage.go: the write path (Apply), conditions, clustering order, memory charged.
//   - viewkeys.go, rows.go: a view row's key, a row's values by column.
//   - schema.go: keyspaces and schema versions, CREATE TABLE (NewTable); table_options.go,
//     conds.go and functions.go below it.
//   - table.go: a table's columns, indexes, views, and the store of its data.
//   - data.go: partitions, rows and cells; memory.go and types.go at the bottom.
package storage
