package storage

// A row's values read by column, as SELECT * and the conditions of a write show them.

// fullRow returns a row's values in SELECT * order. The caller holds the shard lock.
func fullRow(t *Table, part *Partition, row *Row, now int64) [][]byte {
	pkVals, ok := DecodePK(part.Key, len(t.Pk))
	if !ok {
		return nil
	}
	out := make([][]byte, 0, len(t.Cols))
	for _, col := range t.Cols {
		out = append(out, CellValue(col, pkVals, part, row, now))
	}
	return out
}

// cellValue returns the value of col in a row of a partition, pkVals its partition key's
// values, if live at now. The caller holds the shard lock.
func CellValue(col *Column, pkVals [][]byte, part *Partition, row *Row, now int64) []byte {
	switch col.Kind {
	case KindPartitionKey:
		return pkVals[col.Pos]
	case KindClustering:
		if row == nil {
			return nil
		}
		return row.Ck[col.Pos]
	case KindStatic:
		if part.Static == nil {
			return nil
		}
		if c := part.Static.Cell(col.Pos); c != nil && c.Live(now) {
			return c.v
		}
		return nil
	}
	if row == nil {
		return nil
	}
	if c := row.Cell(col.Pos); c != nil && c.Live(now) {
		return c.v
	}
	return nil
}
