// Package stats holds loadcheck's statistics: a sample's summary, the degradation of one
// mode's op rate against another's with its error, Welch's and the paired t-tests on
// Student's t distribution, and Holm's adjustment of several p-values. It knows nothing of
// modes, runs or reports.
package stats

import (
	"math"
	"sort"
)

// Summary describes a small sample, such as one mode's op rates over rounds.
type Summary struct {
	N      int
	Mean   float64
	Stdev  float64 // sample standard deviation (n-1); 0 when n < 2
	Stderr float64 // standard error of the mean, stdev/√n
}

// Summarize returns the count, mean, sample standard deviation and standard error of xs.
func Summarize(xs []float64) Summary {
	s := Summary{N: len(xs)}
	if s.N == 0 {
		return s
	}
	for _, x := range xs {
		s.Mean += x
	}
	s.Mean /= float64(s.N)
	if s.N < 2 {
		return s
	}
	var ss float64
	for _, x := range xs {
		d := x - s.Mean
		ss += d * d
	}
	s.Stdev = math.Sqrt(ss / float64(s.N-1))
	s.Stderr = s.Stdev / math.Sqrt(float64(s.N))
	return s
}

// Degradation returns 100·(1 − mode/base) and its standard error, propagated from the
// standard errors of the two means as for a ratio of independent estimates:
// σ(m/b)² = (σm/b)² + (m·σb/b²)².
func Degradation(mode, base Summary) (pct, err float64) {
	if base.Mean == 0 {
		return 0, 0
	}
	r := mode.Mean / base.Mean
	sr := math.Hypot(mode.Stderr/base.Mean, mode.Mean*base.Stderr/(base.Mean*base.Mean))
	return 100 * (1 - r), 100 * sr
}

// TTest is the result of a two-sample t-test.
type TTest struct {
	T, DF, P float64
	OK       bool // false when either sample has fewer than two values
}

// Welch runs Welch's unequal-variances t-test on a and b and returns the two-sided p-value.
// Two samples without any spread are decided exactly: p is 1 when their means are equal
// and 0 when they differ.
func Welch(a, b []float64) TTest {
	if len(a) < 2 || len(b) < 2 {
		return TTest{}
	}
	sa, sb := Summarize(a), Summarize(b)
	va := sa.Stdev * sa.Stdev / float64(sa.N)
	vb := sb.Stdev * sb.Stdev / float64(sb.N)
	se := math.Sqrt(va + vb)
	diff := sa.Mean - sb.Mean
	if se == 0 {
		if diff == 0 {
			return TTest{T: 0, DF: float64(sa.N + sb.N - 2), P: 1, OK: true}
		}
		return TTest{T: math.Copysign(math.Inf(1), diff), DF: float64(sa.N + sb.N - 2), P: 0, OK: true}
	}
	t := diff / se
	df := (va + vb) * (va + vb) / (va*va/float64(sa.N-1) + vb*vb/float64(sb.N-1))
	return TTest{T: t, DF: df, P: StudentTwoSided(t, df), OK: true}
}

// OneSampleT tests whether the mean of xs differs from zero: on per-round differences it is
// the paired t-test, which cancels drift that moves every mode of a round alike.
func OneSampleT(xs []float64) TTest {
	if len(xs) < 2 {
		return TTest{}
	}
	s := Summarize(xs)
	df := float64(s.N - 1)
	if s.Stderr == 0 {
		if s.Mean == 0 {
			return TTest{DF: df, P: 1, OK: true}
		}
		return TTest{T: math.Copysign(math.Inf(1), s.Mean), DF: df, P: 0, OK: true}
	}
	t := s.Mean / s.Stderr
	return TTest{T: t, DF: df, P: StudentTwoSided(t, df), OK: true}
}

// PairedDegradation returns each round's 100·(1 − mode/base), or nil when the rounds do
// not pair up.
func PairedDegradation(mode, base []float64) []float64 {
	if len(mode) != len(base) || len(mode) == 0 {
		return nil
	}
	d := make([]float64, len(mode))
	for i := range mode {
		if base[i] <= 0 {
			return nil
		}
		d[i] = 100 * (1 - mode[i]/base[i])
	}
	return d
}

// StudentTwoSided returns P(|T| ≥ |t|) for Student's t distribution with df degrees of
// freedom: I_{df/(df+t²)}(df/2, 1/2) (Abramowitz & Stegun 26.7.1 with 26.5.27).
func StudentTwoSided(t, df float64) float64 {
	if math.IsInf(t, 0) {
		return 0
	}
	return regIncBeta(df/2, 0.5, df/(df+t*t))
}

// studentCDF returns P(T ≤ t) for Student's t distribution with df degrees of freedom.
func studentCDF(t, df float64) float64 {
	p := StudentTwoSided(t, df) / 2
	if t > 0 {
		return 1 - p
	}
	return p
}

// regIncBeta returns the regularized incomplete beta function I_x(a, b), evaluated by its
// continued fraction (Numerical Recipes, 3rd ed., §6.4), using the symmetry
// I_x(a,b) = 1 − I_{1−x}(b,a) where the fraction converges faster.
func regIncBeta(a, b, x float64) float64 {
	switch {
	case math.IsNaN(x) || math.IsNaN(a) || math.IsNaN(b):
		return math.NaN()
	case x <= 0:
		return 0
	case x >= 1:
		return 1
	}
	lga, _ := math.Lgamma(a)
	lgb, _ := math.Lgamma(b)
	lgab, _ := math.Lgamma(a + b)
	front := math.Exp(lgab - lga - lgb + a*math.Log(x) + b*math.Log1p(-x))
	if x < (a+1)/(a+b+2) {
		return front * betaCF(a, b, x) / a
	}
	return 1 - front*betaCF(b, a, 1-x)/b
}

// betaCF evaluates the continued fraction for the incomplete beta function by the modified
// Lentz method.
func betaCF(a, b, x float64) float64 {
	const (
		maxIter = 500
		eps     = 1e-16
		tiny    = 1e-300
	)
	qab, qap, qam := a+b, a+1, a-1
	c := 1.0
	d := 1 - qab*x/qap
	if math.Abs(d) < tiny {
		d = tiny
	}
	d = 1 / d
	h := d
	for m := 1; m <= maxIter; m++ {
		fm := float64(m)
		m2 := 2 * fm
		aa := fm * (b - fm) * x / ((qam + m2) * (a + m2))
		d = 1 + aa*d
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = 1 + aa/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		h *= d * c
		aa = -(a + fm) * (qab + fm) * x / ((a + m2) * (qap + m2))
		d = 1 + aa*d
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = 1 + aa/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		del := d * c
		h *= del
		if math.Abs(del-1) < eps {
			break
		}
	}
	return h
}

// Finite returns x, or 0 when x is NaN or infinite, so that reports stay valid JSON.
func Finite(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}

// TQuantile returns the t such that P(T ≤ t) = p for Student's t distribution with df
// degrees of freedom, by bisection of studentCDF (p in (0, 1)).
func TQuantile(p, df float64) float64 {
	if df <= 0 || p <= 0 || p >= 1 || math.IsNaN(df) {
		return math.NaN()
	}
	lo, hi := -1e3, 1e3
	for range 200 {
		mid := (lo + hi) / 2
		if studentCDF(mid, df) < p {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// Holm returns Holm's step-down adjustment of ps: sorted ascending, the i-th smallest
// (from 0) is multiplied by m−i, and each adjusted p is at least the one before it,
// capped at 1. It controls the chance of any false breach among m budgets at the level.
func Holm(ps []float64) []float64 {
	m := len(ps)
	idx := make([]int, m)
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return ps[idx[a]] < ps[idx[b]] })
	adj := make([]float64, m)
	run := 0.0
	for rank, i := range idx {
		run = math.Max(run, math.Min(1, float64(m-rank)*ps[i]))
		adj[i] = run
	}
	return adj
}
