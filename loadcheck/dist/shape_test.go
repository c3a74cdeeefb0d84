package dist

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// The shapes of cassandra-stress's distributions (tools/stress, OptionDistribution and
// the generate package), from which TestDistShape derives each value's probability:
//   - UNIFORM(min..Max): commons-math's UniformRealDistribution(min, max+1), truncated to
//     a long (DistributionBoundApache): each of min..Max with 1/(max−min+1).
//   - GAUSSIAN(min..Max[,stdvrng]) and (min..Max,mean,stdev): NormalDistribution(mean,
//     stdev), with mean (min+max)/2 and stdev (max−min)/2/stdvrng (stdvrng 3) unless given,
//     truncated toward zero by Java's (long) cast and then bounded to [min, max].
//   - EXP(min..Max): ExponentialDistribution with mean (max−min)/F⁻¹(1 − √(1/(max−min))),
//     F that of the exponential of mean 1; a draw x gives min + clamp((long) x, 0, max−min)
//     (DistributionOffsetApache).
//   - EXTREME(min..Max,shape): WeibullDistribution(shape, scale), scale (max−min)/F⁻¹(1 −
//     √(1/(max−min))) for the Weibull of that shape and scale 1, offset as EXP.
//   - FIXED(v): v.
//   - A leading ~ (DistributionInverted) yields max − (x − min).

// truncCDF is P(trunc(X) ≤ v) for X continuous with CDF f: X < v+1 for v ≥ 0, X ≤ v below.
func truncCDF(f func(float64) float64, v int64) float64 {
	if v >= 0 {
		return f(float64(v) + 1)
	}
	return f(float64(v))
}

// stressPMF returns the probability of each value min..Max of spec under cassandra-stress's
// definition, computed from the distribution's CDF rather than by drawing.
func stressPMF(tb testing.TB, spec string) (min int64, p []float64) {
	tb.Helper()
	d, err := Parse(spec)
	if err != nil {
		tb.Fatal(err)
	}
	n := d.Max - d.Min + 1
	p = make([]float64, n)
	delta := float64(d.Max - d.Min)
	tail := -math.Log(math.Sqrt(1 / delta)) // F⁻¹(1 − √(1/delta)) of the exponential of mean 1
	// g(v) is P(value ≤ v) before inversion, for v in min..Max.
	var g func(v int64) float64
	switch d.kind {
	case distFixed:
		g = func(int64) float64 { return 1 }
	case distUniform:
		g = func(v int64) float64 { return float64(v-d.Min+1) / float64(n) }
	case distGaussian:
		f := func(x float64) float64 { return 0.5 * math.Erfc(-(x-d.mean)/(d.stdev*math.Sqrt2)) }
		g = func(v int64) float64 { return truncCDF(f, v) }
	case distExp:
		mean := delta / tail
		g = func(v int64) float64 { return 1 - math.Exp(-float64(v-d.Min+1)/mean) }
	case distExtreme:
		scale := delta / math.Pow(tail, 1/d.shape)
		g = func(v int64) float64 { return 1 - math.Exp(-math.Pow(float64(v-d.Min+1)/scale, d.shape)) }
	default:
		tb.Fatalf("%s: no reference shape", spec)
	}
	prev := 0.0
	for i := range n {
		c := 1.0
		if v := d.Min + i; v < d.Max {
			c = g(v)
		}
		p[i] = c - prev
		prev = c
	}
	if d.inverse {
		for i, j := 0, len(p)-1; i < j; i, j = i+1, j-1 {
			p[i], p[j] = p[j], p[i]
		}
	}
	return d.Min, p
}

// chiSquare compares the counts of draws with the probabilities p over adjacent values,
// merged until each bin expects at least 20 draws, and returns the statistic and its
// degrees of freedom.
func chiSquare(counts []int, p []float64, draws int) (x2 float64, df int) {
	var obs, exp float64
	bins := 0
	flush := func() {
		x2 += (obs - exp) * (obs - exp) / exp
		bins++
		obs, exp = 0, 0
	}
	for i := range p {
		obs += float64(counts[i])
		exp += p[i] * float64(draws)
		if exp >= 20 && float64(draws)*sumFloats(p[i+1:]) >= 20 {
			flush()
		}
	}
	if exp > 0 || obs > 0 {
		if exp == 0 {
			return math.Inf(1), bins
		}
		flush()
	}
	return x2, bins - 1
}

func sumFloats(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s
}

// chiSquareCritical is the chi-square quantile of df degrees of freedom that a statistic
// exceeds with probability 0.001, by the Wilson–Hilferty approximation (within 1% for
// df ≥ 3; exact enough for a test at this level).
func chiSquareCritical(df int) float64 {
	const z = 3.0902 // the standard normal's 0.999 quantile
	k := float64(df)
	a := 2 / (9 * k)
	return k * math.Pow(1-a+z*math.Sqrt(a), 3)
}

// TestDistShape draws 200,000 values from each distribution with a fixed seed and checks
// their histogram against cassandra-stress's definition by a chi-square test at the 0.001
// level, and that the bounds are drawn as often as the definition says (every value of a
// uniform, the max of a uniform included). A uniform that never draws its max, a gaussian
// twice too wide or off by half a unit, an exponential or Weibull of the wrong mean or
// shape, or an inversion that is not a mirror fails it.
func TestDistShape(t *testing.T) {
	const draws = 200_000
	specs := []string{
		"fixed(7)",
		"uniform(1..100)",
		"uniform(-5..5)",
		"~uniform(1..20)",
		"uniform(1k..1k)",
		"gaussian(1..100)",
		"gaussian(1..100,1.5)",
		"normal(0..1000,300,50)",
		"gauss(-50..50)",
		"~gaussian(1..30)",
		"exp(1..100)",
		"~exp(1..100)",
		"exp(0..5000)",
		"extreme(1..100,1.5)",
		"extreme(1..1000,0.5)",
		"~extr(1..50,2)",
	}
	for i, spec := range specs {
		t.Run(spec, func(t *testing.T) {
			lo, p := stressPMF(t, spec)
			d, _ := Parse(spec)
			r := rand.New(rand.NewPCG(58, uint64(i)))
			counts := make([]int, len(p))
			for range draws {
				v := d.Sample(r, -1)
				if v < lo || v >= lo+int64(len(p)) {
					t.Fatalf("drew %d, outside [%d..%d]", v, lo, lo+int64(len(p))-1)
				}
				counts[v-lo]++
			}
			// Every value the definition gives at least 1/20,000 is drawn, the bounds too.
			for j, pj := range p {
				if pj*draws >= 10 && counts[j] == 0 {
					t.Errorf("%d never drawn in %d; the definition gives it %.3g", lo+int64(j), draws, pj)
				}
			}
			if len(p) == 1 {
				return
			}
			x2, df := chiSquare(counts, p, draws)
			if crit := chiSquareCritical(df); !(x2 <= crit) {
				t.Errorf("chi-square %.1f over %d df, above %.1f (p < 0.001): not cassandra-stress's shape\n%s", x2, df, crit, histDiff(lo, counts, p, draws))
			}
		})
	}
}

// histDiff lists the first values whose counts are furthest from the definition's.
func histDiff(lo int64, counts []int, p []float64, draws int) string {
	s := ""
	shown := 0
	for j := range p {
		e := p[j] * float64(draws)
		if e > 0 && math.Abs(float64(counts[j])-e) > 4*math.Sqrt(e)+1 && shown < 8 {
			s += "  " + itoa(lo+int64(j)) + ": drawn " + itoa(int64(counts[j])) + ", expected " + itoa(int64(math.Round(e))) + "\n"
			shown++
		}
	}
	return s
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
