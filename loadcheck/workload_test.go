package loadcheck

import (
	"math/rand/v2"
	"testing"
)

type testOpState struct {
	rng  *rand.Rand
	key  []byte
	cols [][]byte
}

func newTestOpState() *testOpState {
	s := &testOpState{rng: rand.New(rand.NewPCG(1, 2)), key: make([]byte, keyLen)}
	for i := 0; i < colCount; i++ {
		s.cols = append(s.cols, make([]byte, colLen))
	}
	return s
}

func TestPutKey(t *testing.T) {
	tests := []struct {
		k    int64
		want string
	}{{0, "0000000000"}, {1, "0000000001"}, {1234567890, "1234567890"}, {100000, "0000100000"}}
	for _, tt := range tests {
		b := make([]byte, keyLen)
		putKey(b, tt.k)
		if string(b) != tt.want {
			t.Errorf("putKey(%d) = %q; want %q", tt.k, b, tt.want)
		}
	}
}

func TestPopulationNext(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	tests := []struct {
		spec string
		mean float64 // expected mean of the keys, within 2%
	}{
		{"seq=1..10", 5.5},
		{"uniform(1..1000)", 500.5},
		{"gaussian(1..1000)", 500.5},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			p, err := parsePop(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			p = p.fresh()
			var sum float64
			const n = 20000
			for i := 0; i < n; i++ {
				k := p.next(r)
				if k < p.min || k > p.max {
					t.Fatalf("key %d outside %d..%d", k, p.min, p.max)
				}
				sum += float64(k)
			}
			if mean := sum / n; mean < tt.mean*0.98 || mean > tt.mean*1.02 {
				t.Errorf("mean key = %.1f; want about %.1f", mean, tt.mean)
			}
		})
	}
	// seq visits the keys in order and wraps around.
	p, _ := parsePop("seq=5..7")
	p = p.fresh()
	var got []int64
	for i := 0; i < 5; i++ {
		got = append(got, p.next(r))
	}
	if want := []int64{5, 6, 7, 5, 6}; !equalInts(got, want) {
		t.Errorf("seq keys = %v; want %v", got, want)
	}
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestParseRatio(t *testing.T) {
	tests := []struct {
		in          string
		write, read float64
		ok          bool
	}{
		{"write=1,read=9", 1, 9, true},
		{"ratio(write=10,read=90)", 10, 90, true},
		{"read=3", 0, 3, true},
		{"insert=2, read=2", 2, 2, true},
		{"", 1, 9, true},
		{"write=1,read=", 0, 0, false},
		{"ratio(write=1", 0, 0, false},
		{"write=1,write=2", 0, 0, false},
	}
	for _, tt := range tests {
		w, r, err := parseRatio(tt.in)
		if (err == nil) != tt.ok || tt.ok && (w != tt.write || r != tt.read) {
			t.Errorf("parseRatio(%q) = %v, %v, %v; want %v, %v, ok=%v", tt.in, w, r, err, tt.write, tt.read, tt.ok)
		}
	}
}
