package loadcheck

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/tracecar/tracecar/internal/cql/cqltext"
	"github.com/tracecar/tracecar/loadcheck/values"
)

// A profile's data, as cassandra-stress makes it: every value is a function of the
// partition's seed (drawn from --pop), the column and the row, so that a query binds the
// key and clustering values of a row that a write made. A column's population draws the
// value's identity (so fixed(1) gives every partition the same value), its size the
// value's length (a collection's element count), and a clustering column's cluster the
// number of its distinct values under each parent; a partition's rows are every
// combination of its clustering values.

// gen is a worker's deterministic random source, reseeded for every value. It is not safe
// for concurrent use.
type gen struct {
	pcg *rand.PCG
	r   *rand.Rand
	buf [64]byte
	// arena, when not nil, holds the text and fixed-size values made since reset, instead
	// of an allocation each: for a caller that is done with them before the next reset.
	arena []byte
}

// useArena makes g keep its values in an arena that reset empties.
func (g *gen) useArena() { g.arena = make([]byte, 0, 4096) }

// reset forgets the values made since the last one, when g keeps them in an arena.
func (g *gen) reset() { g.arena = g.arena[:0] }

// alloc returns n bytes for a value: from the arena, when g keeps one. A full arena is
// replaced by a larger one; the values already made keep the old one alive.
func (g *gen) alloc(n int) []byte {
	if g.arena == nil {
		return make([]byte, n)
	}
	if len(g.arena)+n > cap(g.arena) {
		g.arena = make([]byte, 0, max(2*cap(g.arena), n))
	}
	end := len(g.arena) + n
	v := g.arena[len(g.arena):end:end]
	g.arena = g.arena[:end]
	return v
}

func newGen() *gen {
	pcg := rand.NewPCG(0, 0)
	return &gen{pcg: pcg, r: rand.New(pcg)}
}

func (g *gen) seed(a, b uint64) { g.pcg.Seed(a, b^0x9e3779b97f4a7c15) }

// value returns column c's value for ordinal (the partition seed for a partition key
// column, the clustering index, or the row index) of the partition with seed.
func (g *gen) value(c *pcol, seed, ordinal int64) []byte {
	if c.counter {
		return []byte{0, 0, 0, 0, 0, 0, 0, 1}
	}
	g.seed(uint64(seed), c.salt+uint64(ordinal)*0xbf58476d1ce4e5b9)
	id := c.spec.population.Sample(g.r, ordinal)
	g.seed(uint64(id), c.salt)
	n := c.spec.size.Sample(g.r, ordinal)
	if c.text {
		// The common case, made straight from the source, 8 bytes a draw: letters and
		// digits (valid UTF-8 and ASCII), or any bytes.
		out := g.alloc(int(min(max(n, 0), 1<<20)))
		for i := 0; i < len(out); i += 8 {
			w := g.r.Uint64()
			for j := i; j < min(i+8, len(out)); j++ {
				out[j] = byte(w)
				w >>= 8
			}
		}
		if !c.blob {
			for i, b := range out {
				out[i] = values.Alnum[int(b)%len(values.Alnum)]
			}
		}
		return out
	}
	if c.fixed > 0 {
		// The bytes it takes, drawn as for any other type: the same value.
		for i := 0; i < c.fixed; i += 8 {
			binary.LittleEndian.PutUint64(g.buf[i:], g.r.Uint64())
		}
		v := g.alloc(c.fixed)
		copy(v, g.buf[:])
		values.Fix(c.typ, v)
		return v
	}
	for i := 0; i < len(g.buf); i += 8 {
		binary.LittleEndian.PutUint64(g.buf[i:], g.r.Uint64())
	}
	return encodeValue(c.typ, n, g.buf[:])
}

// encodeValue returns a value of typ from the random bytes r: n is a text or blob's
// length and a collection's element count.
func encodeValue(typ string, n int64, r []byte) []byte {
	n = max(n, 0)
	t := strings.TrimSpace(typ)
	if inner, ok := strings.CutPrefix(t, "frozen<"); ok {
		t = strings.TrimSuffix(inner, ">")
	}
	switch {
	case t == "time":
		v := binary.BigEndian.Uint64(r) % (86400 * 1e9)
		return binary.BigEndian.AppendUint64(nil, v)
	case strings.HasPrefix(t, "list<"), strings.HasPrefix(t, "set<"):
		per := 4 + values.ElemLen(t[strings.IndexByte(t, '<')+1:len(t)-1])
		return values.Of(t, int32(4+min(n, 64)*int64(per)), r)
	case strings.HasPrefix(t, "map<"):
		kv := values.SplitTypes(t[4 : len(t)-1])
		if len(kv) == 2 {
			per := 8 + values.ElemLen(kv[0]) + values.ElemLen(kv[1])
			return values.Of(t, int32(4+min(n, 64)*int64(per)), r)
		}
	}
	return values.Of(t, int32(min(n, 1<<20)), r)
}

// ppart is one partition: its seed, key values, and the count of each clustering level's
// values; those values are made when a row needs them.
type ppart struct {
	seed   int64
	key    [][]byte
	counts []int64
	rows   int64
}

// partition computes the partition with seed. A clustering level's values are its
// column's values for the indexes 0 to its count − 1; values that repeat (a boolean, a
// small population) make fewer distinct rows than the counts say.
func (g *gen) partition(t *ptable, seed int64, dst *ppart) {
	dst.seed = seed
	dst.key = dst.key[:0]
	for _, c := range t.pk {
		dst.key = append(dst.key, g.value(c, seed, seed))
	}
	dst.counts = dst.counts[:0]
	dst.rows = 1
	for _, c := range t.ck {
		g.seed(uint64(seed), c.salt^0x5bd1e995)
		n := max(c.spec.cluster.Sample(g.r, -1), 1)
		dst.counts = append(dst.counts, n)
		dst.rows *= n
	}
}

// clusteringIndex returns the index of clustering level l's value in row i of part.
func (part *ppart) clusteringIndex(l int, i int64) int64 {
	for k := len(part.counts) - 1; k > l; k-- {
		i /= part.counts[k]
	}
	return i % part.counts[l]
}

// colValue returns column c's value in row i of part.
func (g *gen) colValue(t *ptable, c *pcol, part *ppart, i int64) []byte {
	switch c.kind {
	case "partition_key":
		return part.key[c.pos]
	case "clustering":
		return g.value(c, part.seed, part.clusteringIndex(c.pos, i))
	case "static":
		return g.value(c, part.seed, -2)
	}
	return g.value(c, part.seed, i)
}

// bindColumns returns the column each ? of a statement binds: the name before the
// comparison (=, <, >, <=, >=, !=, CONTAINS) or the arithmetic (c = c + ?) it follows.
// Any other ?, and a named :marker, cannot be bound from columnspec.
func bindColumns(text string) ([]string, error) {
	var out []string
	var prev [3]cqltext.Token // the last significant tokens, prev[0] the latest
	for i := 0; ; {
		t := cqltext.Next(text, i)
		i = t.End
		switch t.Kind {
		case cqltext.EOF:
			return out, nil
		case cqltext.Space, cqltext.Comment:
			continue
		}
		if cqltext.IsPunct(text, t, ":") {
			return nil, fmt.Errorf("the named marker at offset %d cannot be bound: use ?", t.Start)
		}
		if cqltext.IsPunct(text, t, "?") {
			name := ""
			op := prev[0]
			switch {
			case isComparison(text, op) && isName(prev[1]):
				name = cqltext.Name(text, prev[1])
			case (cqltext.IsPunct(text, op, "+") || cqltext.IsPunct(text, op, "-")) && isName(prev[1]):
				name = cqltext.Name(text, prev[1])
			}
			if name == "" {
				return nil, fmt.Errorf("the ? at offset %d cannot be bound from columnspec: it must follow a column and =, <, >, <=, >=, != or CONTAINS (as in pk = ?); LIMIT ?, IN ?, tuples and function arguments are not supported", t.Start)
			}
			out = append(out, name)
		}
		prev[2], prev[1], prev[0] = prev[1], prev[0], t
	}
}

func isName(t cqltext.Token) bool { return t.Kind == cqltext.Ident || t.Kind == cqltext.QuotedIdent }

func isComparison(text string, t cqltext.Token) bool {
	for _, p := range []string{"=", "<", ">", "<=", ">=", "!="} {
		if cqltext.IsPunct(text, t, p) {
			return true
		}
	}
	return cqltext.IsKeyword(text, t, "contains")
}
