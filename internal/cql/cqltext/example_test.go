package cqltext_test

import (
	"fmt"

	"github.com/tracecar/tracecar/internal/cql/cqltext"
)

func Example() {
	q := `SELECT v FROM Shop."Orders" WHERE id = 'it''s' -- mine`
	for i := 0; ; {
		t := cqltext.NextSignificant(q, i)
		if t.Kind == cqltext.EOF {
			break
		}
		fmt.Printf("%-11s %-10s %q\n", t.Kind, q[t.Start:t.End], cqltext.Name(q, t))
		i = t.End
	}
	// Output:
	// Ident       SELECT     "select"
	// Ident       v          "v"
	// Ident       FROM       "from"
	// Ident       Shop       "shop"
	// Punct       .          ""
	// QuotedIdent "Orders"   "Orders"
	// Ident       WHERE      "where"
	// Ident       id         "id"
	// Punct       =          ""
	// String      'it''s'    ""
}

// A cut prefix says what it knows: a name at the cut might go on beyond it.
func ExampleToken_Open() {
	q := []byte("SELECT * FROM system.local WHERE key = 'local'")
	at := len("SELECT * FROM system.")
	for _, cut := range []int{at + 3, at + 5, at + 6} {
		t := cqltext.NextSignificant(q[:cut], at)
		fmt.Printf("%q open=%v\n", q[t.Start:t.End], t.Open())
	}
	// Output:
	// "loc" open=true
	// "local" open=true
	// "local" open=false
}
