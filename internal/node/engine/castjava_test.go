package engine

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node/grammar"
)

// TestCastNarrowingJava casts 96 numbers to every other numeric type and compares each
// result, byte for byte, with what Java gives (testdata/castref/cases.json, written by
// testdata/castref/Gen.java with the Number methods Cassandra 4.1's CastFcts uses): integers
// between 2^31 and 2^63 and beyond (varint, decimal) narrowed to their low bits, ±2^63 and
// past it saturating from float and double, NaN to 0, the infinities to the ends, a decimal's
// integer part, and decimals made from the double. Saturating where Java keeps the low
// bits, or the reverse, or an off-by-one at 2^63, fails it.
func TestCastNarrowingJava(t *testing.T) {
	b, err := os.ReadFile("testdata/castref/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Cases []struct {
			Type  string             `json:"type"`
			Value string             `json:"value"`
			Bytes string             `json:"bytes"`
			Casts map[string]*string `json:"casts"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Cases) < 90 {
		t.Fatalf("%d cases; want Gen.java's 96", len(ref.Cases))
	}
	n := 0
	for _, c := range ref.Cases {
		from, ok := grammar.SimpleTypes[c.Type]
		if !ok {
			t.Fatalf("unknown type %q", c.Type)
		}
		in, err := hex.DecodeString(c.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		for to, want := range c.Casts {
			if !castable(from, to) {
				t.Errorf("%s %s: no cast to %s; Cassandra has one", c.Type, c.Value, to)
				continue
			}
			got := applyCasts([]castStep{{from: cql.TypeInfo{ID: from}, to: cql.TypeInfo{ID: grammar.SimpleTypes[to]}}}, in)
			switch {
			case want == nil && got != nil:
				t.Errorf("CAST(%s %s AS %s) = %x; Java has none (it throws)", c.Type, c.Value, to, got)
			case want != nil && hex.EncodeToString(got) != *want:
				t.Errorf("CAST(%s %s AS %s) = %x; Java's is %s", c.Type, c.Value, to, got, *want)
			}
			n++
		}
	}
	if n < 600 {
		t.Errorf("%d casts checked; want Gen.java's 650 or so", n)
	}
}
