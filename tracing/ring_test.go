package tracing

import (
	"fmt"
	"testing"
)

func TestRing(t *testing.T) {
	tests := []struct {
		name  string
		size  int
		put   int
		limit int
		want  []string
	}{
		{name: "empty", size: 3, put: 0, limit: 0, want: []string{}},
		{name: "partial newest first", size: 3, put: 2, limit: 0, want: []string{"s1", "s0"}},
		{name: "wrapped", size: 3, put: 5, limit: 0, want: []string{"s4", "s3", "s2"}},
		{name: "limit", size: 3, put: 5, limit: 2, want: []string{"s4", "s3"}},
		{name: "limit above size", size: 3, put: 5, limit: 10, want: []string{"s4", "s3", "s2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRing(tt.size)
			for i := range tt.put {
				r.put(&Session{ID: fmt.Sprintf("s%d", i)})
			}
			got := r.list(tt.limit)
			ids := make([]string, len(got))
			for i, s := range got {
				ids[i] = s.ID
			}
			if fmt.Sprint(ids) != fmt.Sprint(tt.want) {
				t.Errorf("list(%d) = %v; want %v", tt.limit, ids, tt.want)
			}
		})
	}
}

func TestRingFind(t *testing.T) {
	r := newRing(2)
	for i := range 3 {
		r.put(&Session{ID: fmt.Sprintf("s%d", i), DurationUS: int64(i)})
	}
	if s, ok := r.find("s2"); !ok || s.DurationUS != 2 {
		t.Errorf("find(s2) = %+v, %v; want duration 2, true", s, ok)
	}
	if _, ok := r.find("s0"); ok {
		t.Errorf("find(s0) found an overwritten session")
	}
}

func TestPreparedMapBound(t *testing.T) {
	p := NewStatements(2)
	p.Put([]byte("a"), Statement{Query: "qa", System: 1})
	p.Put([]byte("b"), Statement{Query: "qb", Keyspace: "ks"})
	p.Put([]byte("a"), Statement{Query: "qa2"}) // update, no eviction
	if !p.HasSystem() {
		t.Errorf("HasSystem() = false after an update without System; want the system table kept")
	}
	p.Put([]byte("c"), Statement{Query: "qc"}) // evicts the oldest, a
	tests := []struct {
		id, want string
		ok       bool
	}{
		{"a", "", false},
		{"b", "qb", true},
		{"c", "qc", true},
	}
	for _, tt := range tests {
		if got, ok := p.get([]byte(tt.id)); got != tt.want || ok != tt.ok {
			t.Errorf("get(%q) = %q, %v; want %q, %v", tt.id, got, ok, tt.want, tt.ok)
		}
	}
	if got := p.len(); got != 2 {
		t.Errorf("len() = %d; want 2", got)
	}
	if p.HasSystem() {
		t.Errorf("HasSystem() = true after the system statement was evicted")
	}
	p.Put([]byte("b"), Statement{System: 2})
	if st := p.Lookup([]byte("b")); st == nil || st.Query != "qb" || st.Keyspace != "ks" || st.System != 2 || !p.HasSystem() {
		t.Errorf("Lookup(b) = %+v after adding its system table; want the query and keyspace kept and System 2", st)
	}
}
