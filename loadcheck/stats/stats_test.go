package stats

import (
	"math"
	"testing"
)

func near(got, want, tol float64) bool {
	return math.Abs(got-want) <= tol
}

// ScyllaDB PR #8314 (../shared/reference/001_6f8ba84e15579231.txt): op rates of five runs per
// mode, with the stdev, average and degradation its author computed in a spreadsheet.
var (
	scyllaBaseline = []float64{29018, 28909, 28900, 28921, 28821}
	scyllaFast     = []float64{26468, 26274, 26547, 26669, 26385}
	scyllaNoFast   = []float64{23591, 23584, 23598, 23596, 23601}
)

func TestSummarize(t *testing.T) {
	tests := []struct {
		name              string
		xs                []float64
		mean, stdev, serr float64
	}{
		// stdev and avg rows of the PR's table.
		{"scylla baseline", scyllaBaseline, 28913.8, 70.24030182, 70.24030182 / math.Sqrt(5)},
		{"scylla fast", scyllaFast, 26468.6, 150.9678774, 150.9678774 / math.Sqrt(5)},
		{"scylla nofast", scyllaNoFast, 23594, 6.670832032, 6.670832032 / math.Sqrt(5)},
		{"one value", []float64{5}, 5, 0, 0},
		{"empty", nil, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Summarize(tt.xs)
			if !near(s.Mean, tt.mean, 1e-6) || !near(s.Stdev, tt.stdev, 1e-6) || !near(s.Stderr, tt.serr, 1e-6) {
				t.Errorf("Summarize = mean %v stdev %v stderr %v; want %v %v %v", s.Mean, s.Stdev, s.Stderr, tt.mean, tt.stdev, tt.serr)
			}
		})
	}
}

func TestDegradation(t *testing.T) {
	base := Summarize(scyllaBaseline)
	tests := []struct {
		name     string
		mode     Summary
		base     Summary
		pct, err float64
		tol      float64
	}{
		// The PR reports 8.46% and 18.40%, rounded to two decimals.
		{"scylla fast", Summarize(scyllaFast), base, 8.46, 0.254, 0.005},
		{"scylla nofast", Summarize(scyllaNoFast), base, 18.40, 0.0899, 0.005},
		// By hand: r = 90/100, σr = √((1/100)² + (90·2/100²)²) = √(1e-4 + 3.24e-4) = 0.0205913.
		{"hand", Summary{N: 4, Mean: 90, Stderr: 1}, Summary{N: 4, Mean: 100, Stderr: 2}, 10, 2.05913, 1e-5},
		{"faster than baseline", Summary{Mean: 110}, Summary{Mean: 100}, -10, 0, 1e-9},
		{"itself", base, base, 0, 100 * math.Sqrt2 * base.Stderr / base.Mean, 1e-9},
		{"zero baseline", Summary{Mean: 5}, Summary{}, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pct, err := Degradation(tt.mode, tt.base)
			if !near(pct, tt.pct, tt.tol) || !near(err, tt.err, math.Max(tt.tol, 1e-3*tt.err)) {
				t.Errorf("Degradation = %.5f ± %.5f; want %.5f ± %.5f", pct, err, tt.pct, tt.err)
			}
		})
	}
}

func TestRegIncBeta(t *testing.T) {
	// Identities (Abramowitz & Stegun 26.5): I_x(1,1) = x, I_x(a,1) = x^a,
	// I_x(1,b) = 1-(1-x)^b, I_½(a,a) = ½, and I_x(½,½) = (2/π)·asin(√x).
	tests := []struct {
		name    string
		a, b, x float64
		want    float64
	}{
		{"uniform", 1, 1, 0.3, 0.3},
		{"x^a", 3.5, 1, 0.6, math.Pow(0.6, 3.5)},
		{"1-(1-x)^b", 1, 4, 0.2, 1 - math.Pow(0.8, 4)},
		{"symmetric half", 7.5, 7.5, 0.5, 0.5},
		{"arcsine", 0.5, 0.5, 0.25, 2 / math.Pi * math.Asin(0.5)},
		{"zero", 2, 3, 0, 0},
		{"one", 2, 3, 1, 1},
		{"large", 500, 0.5, 0.999, 1 - regIncBeta(0.5, 500, 0.001)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := regIncBeta(tt.a, tt.b, tt.x); !near(got, tt.want, 1e-12) {
				t.Errorf("I_%v(%v,%v) = %.15f; want %.15f", tt.x, tt.a, tt.b, got, tt.want)
			}
		})
	}
}

func TestStudentT(t *testing.T) {
	tests := []struct {
		name    string
		t, df   float64
		wantCDF float64
		tol     float64
	}{
		// Closed forms: df=1 is Cauchy, F(t) = ½ + atan(t)/π; df=2 has
		// F(t) = ½ + t/(2√(2+t²)) (any statistics text, e.g. Wikipedia "Student's t-distribution").
		{"cauchy 1", 1, 1, 0.75, 1e-12},
		{"cauchy -3", -3, 1, 0.5 + math.Atan(-3)/math.Pi, 1e-12},
		{"df2 2.5", 2.5, 2, 0.5 + 2.5/(2*math.Sqrt(2+6.25)), 1e-12},
		{"zero", 0, 7, 0.5, 1e-12},
		// Two-sided critical values from the t table (NIST/SEMATECH e-Handbook 1.3.6.7.2),
		// given to three decimals, so the tolerance is loose.
		{"t.975 df1", 12.706, 1, 0.975, 1e-5},
		{"t.975 df2", 4.303, 2, 0.975, 1e-5},
		{"t.975 df5", 2.571, 5, 0.975, 2e-5},
		{"t.975 df10", 2.228, 10, 0.975, 2e-5},
		{"t.975 df30", 2.042, 30, 0.975, 2e-5},
		{"t.995 df5", 4.032, 5, 0.995, 1e-5},
		{"t.995 df10", 3.169, 10, 0.995, 1e-5},
		{"t.95 df4", 2.132, 4, 0.95, 1e-4},
		// A large df tends to the normal: Φ(1.959964) = 0.975.
		{"normal limit", 1.959964, 1e7, 0.975, 1e-6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := studentCDF(tt.t, tt.df); !near(got, tt.wantCDF, tt.tol) {
				t.Errorf("studentCDF(%v, %v) = %.8f; want %.8f", tt.t, tt.df, got, tt.wantCDF)
			}
		})
	}
}

func TestStudentTIntegral(t *testing.T) {
	// An independent check: integrate the t density with Simpson's rule from 0 to t.
	density := func(x, df float64) float64 {
		lg1, _ := math.Lgamma((df + 1) / 2)
		lg2, _ := math.Lgamma(df / 2)
		return math.Exp(lg1-lg2) / math.Sqrt(df*math.Pi) * math.Pow(1+x*x/df, -(df+1)/2)
	}
	for _, df := range []float64{1.5, 3, 4.7, 12, 60} {
		for _, x := range []float64{0.3, 1, 2.2, 4} {
			const n = 20000
			h := x / n
			s := density(0, df) + density(x, df)
			for i := 1; i < n; i++ {
				w := 2.0
				if i%2 == 1 {
					w = 4
				}
				s += w * density(float64(i)*h, df)
			}
			want := 0.5 + s*h/3
			if got := studentCDF(x, df); !near(got, want, 1e-9) {
				t.Errorf("studentCDF(%v, %v) = %.12f; Simpson gives %.12f", x, df, got, want)
			}
		}
	}
}

func TestWelch(t *testing.T) {
	tests := []struct {
		name       string
		a, b       []float64
		t, df, p   float64
		tolT, tolP float64
		dfKnown    bool
		ok         bool
	}{
		// The three worked examples of Wikipedia's "Welch's t-test" article (t to two decimals,
		// ν to one, p to three).
		{
			name: "wikipedia 1",
			a:    []float64{27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4},
			b:    []float64{27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4},
			t:    -2.46, p: 0.021, tolT: 0.005, tolP: 0.0005, ok: true,
		},
		{
			name: "wikipedia 2",
			a:    []float64{17.2, 20.9, 22.6, 18.1, 21.7, 21.4, 23.5, 24.2, 14.7, 21.8},
			b:    []float64{21.5, 22.8, 21.0, 23.0, 21.6, 23.6, 22.5, 20.7, 23.4, 21.8, 20.7, 21.7, 21.5, 22.5, 23.6, 21.5, 22.5, 23.5, 21.5, 21.8},
			t:    -1.57, df: 9.9, p: 0.149, tolT: 0.005, tolP: 0.0005, dfKnown: true, ok: true,
		},
		{
			name: "wikipedia 3",
			a:    []float64{19.8, 20.4, 19.6, 17.8, 18.5, 18.9, 18.3, 18.9, 19.5, 22.0},
			b:    []float64{28.2, 26.6, 20.1, 23.3, 25.2, 22.1, 17.7, 27.6, 20.6, 13.7, 23.2, 17.5, 20.6, 18.0, 23.9, 21.6, 24.3, 20.4, 23.9, 13.3},
			t:    -2.22, df: 24.5, p: 0.036, tolT: 0.01, tolP: 0.001, dfKnown: true, ok: true,
		},
		{name: "no spread, equal", a: []float64{5, 5, 5}, b: []float64{5, 5}, p: 1, ok: true},
		{name: "no spread, different", a: []float64{5, 5, 5}, b: []float64{6, 6}, t: math.Inf(-1), p: 0, ok: true},
		{name: "one round", a: []float64{5}, b: []float64{6, 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Welch(tt.a, tt.b)
			if got.OK != tt.ok {
				t.Fatalf("Welch ok = %v; want %v", got.OK, tt.ok)
			}
			if !tt.ok {
				return
			}
			if !(got.T == tt.t || near(got.T, tt.t, tt.tolT)) || !near(got.P, tt.p, tt.tolP) {
				t.Errorf("Welch = t %v p %v; want t %v p %v", got.T, got.P, tt.t, tt.p)
			}
			if tt.dfKnown && !near(got.DF, tt.df, 0.05) {
				t.Errorf("Welch df = %v; want %v", got.DF, tt.df)
			}
		})
	}
}

func TestWelchScylla(t *testing.T) {
	// The PR's five-run samples differ by far more than their spread.
	if p := Welch(scyllaFast, scyllaBaseline).P; !(p < 1e-6) {
		t.Errorf("p(fast vs baseline) = %v; want < 1e-6", p)
	}
}

func TestOneSampleT(t *testing.T) {
	// Student's (1908) sleep data, Cushny & Peebles: the extra hours of sleep with drug 2
	// minus drug 1 for ten patients. R's t.test(extra ~ group, data = sleep, paired = TRUE)
	// gives t = -4.0621, df = 9, p-value = 0.002833 (for drug 1 minus drug 2).
	diffs := []float64{1.2, 2.4, 1.3, 1.3, 0.0, 1.0, 1.8, 0.8, 4.6, 1.4}
	got := OneSampleT(diffs)
	if !got.OK || !near(got.T, 4.0621, 5e-5) || got.DF != 9 || !near(got.P, 0.002833, 5e-7) {
		t.Errorf("OneSampleT = %+v; want t 4.0621, df 9, p 0.002833", got)
	}
	if got := OneSampleT([]float64{3}); got.OK {
		t.Errorf("OneSampleT of one value = %+v; want not ok", got)
	}
	if got := OneSampleT([]float64{2, 2, 2}); !got.OK || got.P != 0 {
		t.Errorf("OneSampleT without spread = %+v; want p 0", got)
	}
}

func TestPairedDegradation(t *testing.T) {
	// Round drift that moves both modes alike cancels: the mode is 10% slower every round
	// although the rounds differ by 50%.
	base := []float64{1000, 1500, 2000}
	mode := []float64{900, 1350, 1800}
	d := PairedDegradation(mode, base)
	s := Summarize(d)
	if len(d) != 3 || !near(s.Mean, 10, 1e-9) || !near(s.Stderr, 0, 1e-9) {
		t.Errorf("paired Degradation = %v (mean %v ± %v); want 10, 10, 10", d, s.Mean, s.Stderr)
	}
	if w := Welch(mode, base); !(w.P > 0.5) {
		t.Errorf("Welch p = %v; want > 0.5, blind to the paired difference", w.P)
	}
	if d := PairedDegradation([]float64{1}, []float64{1, 2}); d != nil {
		t.Errorf("unpaired rounds = %v; want nil", d)
	}
}
