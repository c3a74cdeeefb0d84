package cqlsink

import (
	"context"
	"fmt"

	"github.com/tracecar/tracecar/internal/capturefile"
	"github.com/tracecar/tracecar/tracing/capture"
)

// LazySchema is the capture's SchemaSource: it reads system_schema through the node
// session of c, which it opens on first use (the one the node events and the CQL sink
// share).
func LazySchema(c *Connector) capture.SchemaSource { return lazySchema{c} }

type lazySchema struct{ c *Connector }

func (l lazySchema) Keyspace(ctx context.Context, name string) (capturefile.Keyspace, error) {
	s, err := l.c.Session(ctx)
	if err != nil {
		return capturefile.Keyspace{}, err
	}
	k := capturefile.Keyspace{Name: name}
	err = s.Query(`SELECT replication, durable_writes FROM system_schema.keyspaces WHERE keyspace_name = ?`, name).
		WithContext(ctx).Scan(&k.Replication, &k.DurableWrites)
	if err != nil {
		return capturefile.Keyspace{}, fmt.Errorf("read keyspace %s from system_schema.keyspaces: %w", name, err)
	}
	return k, nil
}

func (l lazySchema) Table(ctx context.Context, keyspace, table string) (capturefile.Table, error) {
	s, err := l.c.Session(ctx)
	if err != nil {
		return capturefile.Table{}, err
	}
	t := capturefile.Table{Keyspace: keyspace, Name: table}
	it := s.Query(`SELECT column_name, type, kind, position, clustering_order FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?`,
		keyspace, table).WithContext(ctx).Iter()
	var c capturefile.Column
	for it.Scan(&c.Name, &c.Type, &c.Kind, &c.Position, &c.ClusteringOrder) {
		t.Columns = append(t.Columns, c)
	}
	if err := it.Close(); err != nil {
		return capturefile.Table{}, fmt.Errorf("read table %s.%s from system_schema.columns: %w", keyspace, table, err)
	}
	if len(t.Columns) == 0 {
		return capturefile.Table{}, fmt.Errorf("table %s.%s: not in system_schema.columns", keyspace, table)
	}
	return t, nil
}
