package handover

import (
	"encoding/json"
	"errors"
	"testing"
)

// counter is a part: a number, which refuses to restore a negative one.
type counter struct{ n int }

func (c *counter) ExportState() (json.RawMessage, error) { return json.Marshal(c.n) }
func (c *counter) RestoreState(b json.RawMessage) error {
	var n int
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	if n < 0 {
		return errors.New("negative")
	}
	c.n = n
	return nil
}

// TestPartsRoundTrip: each registered part's state goes over as a member of one JSON
// object, named by the part, and comes back in the part of the same name; a part the
// predecessor did not have keeps its own, a member nothing takes is ignored, and a part
// that refuses its state is named in the error.
func TestPartsRoundTrip(t *testing.T) {
	var old Parts
	a, b := &counter{3}, &counter{5}
	old.Register("a", a)
	old.Register("b", b)
	state, err := old.Export()
	if err != nil {
		t.Fatal(err)
	}
	if string(state) != `{"a":3,"b":5}` {
		t.Errorf("state %s; want {\"a\":3,\"b\":5}", state)
	}
	var succ Parts
	a2, c2 := &counter{}, &counter{7}
	succ.Register("a", a2)
	succ.Register("c", c2)
	if err := succ.Restore(state); err != nil {
		t.Fatal(err)
	}
	if a2.n != 3 || c2.n != 7 {
		t.Errorf("restored a=%d c=%d; want a=3 (inherited) and c=7 (its own)", a2.n, c2.n)
	}
	if err := succ.Restore([]byte(`{"c":-1}`)); err == nil || err.Error() != "inherited c: negative" {
		t.Errorf("restore of a refused state: %v; want the part named", err)
	}
}
