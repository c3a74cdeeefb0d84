package cql

import "testing"

func TestQuoteName(t *testing.T) {
	for in, want := range map[string]string{"t": `"t"`, "MyTable": `"MyTable"`, `a"b`: `"a""b"`, "": `""`} {
		if got := QuoteName(in); got != want {
			t.Errorf("QuoteName(%q) = %s; want %s", in, got, want)
		}
	}
}
