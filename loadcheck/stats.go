package loadcheck

import "math"

// summary describes a small sample, such as one mode's op rates over rounds.
type summary struct {
	n      int
	mean   float64
	stdev  float64 // sample standard deviation (n-1); 0 when n < 2
	stderr float64 // standard error of the mean, stdev/√n
}

func summarize(xs []float64) summary {
	s := summary{n: len(xs)}
	if s.n == 0 {
		return s
	}
	for _, x := range xs {
		s.mean += x
	}
	s.mean /= float64(s.n)
	if s.n < 2 {
		return s
	}
	var ss float64
	for _, x := range xs {
		d := x - s.mean
		ss += d * d
	}
	s.stdev = math.Sqrt(ss / float64(s.n-1))
	s.stderr = s.stdev / math.Sqrt(float64(s.n))
	return s
}

// degradation returns 100·(1 − mode/base) and its standard error, propagated from the
// standard errors of the two means as for a ratio of independent estimates:
// σ(m/b)² = (σm/b)² + (m·σb/b²)².
func degradation(mode, base summary) (pct, err float64) {
	if base.mean == 0 {
		return 0, 0
	}
	r := mode.mean / base.mean
	sr := math.Hypot(mode.stderr/base.mean, mode.mean*base.stderr/(base.mean*base.mean))
	return 100 * (1 - r), 100 * sr
}

// tTest is the result of a two-sample t-test.
type tTest struct {
	t, df, p float64
	ok       bool // false when either sample has fewer than two values
}

// welch runs Welch's unequal-variances t-test on a and b and returns the two-sided p-value.
// Two samples without any spread are decided exactly: p is 1 when their means are equal
// and 0 when they differ.
func welch(a, b []float64) tTest {
	if len(a) < 2 || len(b) < 2 {
		return tTest{}
	}
	sa, sb := summarize(a), summarize(b)
	va := sa.stdev * sa.stdev / float64(sa.n)
	vb := sb.stdev * sb.stdev / float64(sb.n)
	se := math.Sqrt(va + vb)
	diff := sa.mean - sb.mean
	if se == 0 {
		if diff == 0 {
			return tTest{t: 0, df: float64(sa.n + sb.n - 2), p: 1, ok: true}
		}
		return tTest{t: math.Copysign(math.Inf(1), diff), df: float64(sa.n + sb.n - 2), p: 0, ok: true}
	}
	t := diff / se
	df := (va + vb) * (va + vb) / (va*va/float64(sa.n-1) + vb*vb/float64(sb.n-1))
	return tTest{t: t, df: df, p: studentTwoSided(t, df), ok: true}
}

// oneSampleT tests whether the mean of xs differs from zero: on per-round differences it is
// the paired t-test, which cancels drift that moves every mode of a round alike.
func oneSampleT(xs []float64) tTest {
	if len(xs) < 2 {
		return tTest{}
	}
	s := summarize(xs)
	df := float64(s.n - 1)
	if s.stderr == 0 {
		if s.mean == 0 {
			return tTest{df: df, p: 1, ok: true}
		}
		return tTest{t: math.Copysign(math.Inf(1), s.mean), df: df, p: 0, ok: true}
	}
	t := s.mean / s.stderr
	return tTest{t: t, df: df, p: studentTwoSided(t, df), ok: true}
}

// pairedDegradation returns each round's 100·(1 − mode/base), or nil when the rounds do
// not pair up.
func pairedDegradation(mode, base []float64) []float64 {
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

// studentTwoSided returns P(|T| ≥ |t|) for Student's t distribution with df degrees of
// freedom: I_{df/(df+t²)}(df/2, 1/2) (Abramowitz & Stegun 26.7.1 with 26.5.27).
func studentTwoSided(t, df float64) float64 {
	if math.IsInf(t, 0) {
		return 0
	}
	return regIncBeta(df/2, 0.5, df/(df+t*t))
}

// studentCDF returns P(T ≤ t) for Student's t distribution with df degrees of freedom.
func studentCDF(t, df float64) float64 {
	p := studentTwoSided(t, df) / 2
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

// finite returns x, or 0 when x is NaN or infinite, so that reports stay valid JSON.
func finite(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}

// tQuantile returns the t such that P(T ≤ t) = p for Student's t distribution with df
// degrees of freedom, by bisection of studentCDF (p in (0, 1)).
func tQuantile(p, df float64) float64 {
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
