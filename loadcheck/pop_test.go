package loadcheck

import "testing"

func TestParsePop(t *testing.T) {
	tests := []struct {
		in   string
		want string
		size int64
	}{
		{"seq=1..100", "seq=1..100", 100},
		{"uniform(1..1M)", "uniform(1..1000000)", 1000000},
		{"gaussian(1..1k)", "gaussian(1..1000,3)", 1000},
		{"dist=gaussian(10..20,2)", "gaussian(10..20,2)", 11},
		{"uniform( 5 .. 5 )", "uniform(5..5)", 1},
	}
	for _, tt := range tests {
		p, err := parsePop(tt.in)
		if err != nil || p.String() != tt.want || p.size() != tt.size {
			t.Errorf("parsePop(%q) = %v (size %d), %v; want %s (size %d)", tt.in, p, p.size(), err, tt.want, tt.size)
		}
	}
}
