package schedpolicy

import "testing"

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Policy
		ok   bool
	}{
		{"batch", Batch, true},
		{"normal", Normal, true},
		{"", 0, false},
		{"BATCH", 0, false},
		{"fifo", 0, false},
	} {
		got, err := Parse(tc.in)
		if (err == nil) != tc.ok || tc.ok && got != tc.want {
			t.Errorf("Parse(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
		if tc.ok && got.String() != tc.in {
			t.Errorf("Parse(%q).String() = %q", tc.in, got.String())
		}
	}
}
