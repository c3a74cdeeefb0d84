package dist

import (
	"math/rand/v2"
	"testing"
)

func TestParseDist(t *testing.T) {
	tests := []struct {
		spec     string
		kind     distKind
		Min, Max int64
		inverse  bool
	}{
		{"fixed(1)", distFixed, 1, 1, false},
		{"FIXED(10k)", distFixed, 10000, 10000, false},
		{"uniform(1..100B)", distUniform, 1, 100e9, false},
		{"uniform(1..2m)", distUniform, 1, 2e6, false},
		{"seq(1..1k)", distSeq, 1, 1000, false},
		{"gaussian(1..100)", distGaussian, 1, 100, false},
		{"GAUSSIAN(1..100,5)", distGaussian, 1, 100, false},
		{"gaussian(1..100,50,10)", distGaussian, 1, 100, false},
		{"gauss(1..10)", distGaussian, 1, 10, false},
		{"normal(1..10)", distGaussian, 1, 10, false},
		{"norm(1..10)", distGaussian, 1, 10, false},
		{"exp(1..100)", distExp, 1, 100, false},
		{"~exp(1..100)", distExp, 1, 100, true},
		{"extreme(1..1000,1.5)", distExtreme, 1, 1000, false},
		{"extr(1..1000,1.5)", distExtreme, 1, 1000, false},
		{"weibull(1..1000,1.5)", distExtreme, 1, 1000, false},
		{"qextreme(1..1000,1.5,10)", distQExtreme, 1, 1000, false},
		{"qextr(1..1000,1.5,10)", distQExtreme, 1, 1000, false},
		{"~uniform(1..10)", distUniform, 1, 10, true},
		{" uniform( 1 .. 10 ) ", distUniform, 1, 10, false},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			d, err := Parse(tt.spec)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.spec, err)
			}
			if d.kind != tt.kind || d.Min != tt.Min || d.Max != tt.Max || d.inverse != tt.inverse {
				t.Errorf("Parse(%q) = kind %d [%d..%d] inverse %v; want kind %d [%d..%d] inverse %v",
					tt.spec, d.kind, d.Min, d.Max, d.inverse, tt.kind, tt.Min, tt.Max, tt.inverse)
			}
		})
	}
	for _, bad := range []string{"", "uniform", "uniform(1-10)", "zipf(1..10)", "uniform(10..1)", "fixed(x)",
		"gaussian(1..10,0)", "extreme(1..10)", "qextreme(1..10,1.5,0)", "uniform(1..10,3)", "exp(1..10,2)", "uniform(1..10x)"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) succeeded; want an error", bad)
		}
	}
}

// TestDistSample draws from every distribution: each draw is in range, ~ inverts, and
// the skewed ones lean the way cassandra-stress's do.
func TestDistSample(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	mean := func(spec string) float64 {
		d, err := Parse(spec)
		if err != nil {
			t.Fatal(err)
		}
		sum := 0.0
		for i := range 20000 {
			v := d.Sample(r, int64(i))
			if v < d.Min || v > d.Max {
				t.Fatalf("%s drew %d, outside [%d..%d]", spec, v, d.Min, d.Max)
			}
			sum += float64(v)
		}
		return sum / 20000
	}
	checks := []struct {
		spec   string
		lo, hi float64
	}{
		{"fixed(7)", 7, 7},
		{"uniform(1..100)", 48, 53},
		{"seq(1..100)", 50.4, 50.6},
		{"gaussian(1..100)", 48, 53},
		{"gaussian(1..100,20,5)", 19, 21},
		{"exp(1..1000)", 1, 300},
		{"~exp(1..1000)", 700, 1000},
		{"extreme(1..1000,0.5)", 1, 300},
		{"~extreme(1..1000,0.5)", 700, 1000},
		{"qextreme(1..1000,0.5,10)", 1, 350},
		{"~qextreme(1..1000,0.5,10)", 650, 1000},
		{"~uniform(1..100)", 48, 53},
		{"uniform(1k..2k)", 1450, 1550},
	}
	for _, c := range checks {
		if m := mean(c.spec); m < c.lo || m > c.hi {
			t.Errorf("%s: mean %.1f; want in [%g, %g]", c.spec, m, c.lo, c.hi)
		}
	}
	d, _ := Parse("~seq(1..10)")
	if got := d.Sample(r, 0); got != 10 {
		t.Errorf("~seq(1..10) first draw = %d; want 10", got)
	}
	rd, err := ParseRatio("uniform(1..10)/10")
	if err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		if f := rd.Sample(r); f < 0.1 || f > 1 {
			t.Fatalf("uniform(1..10)/10 drew %g", f)
		}
	}
	if _, err := ParseRatio("uniform(1..10)"); err == nil {
		t.Error("a ratio without a divisor was accepted")
	}
}
