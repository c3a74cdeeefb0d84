// Package dist holds the distributions of cassandra-stress's user profiles
// (OptionDistribution): the sizes, populations and clustering counts of a profile's
// columns, and an insert's partitions and select ratio. A spec is NAME(min..max[,params]),
// case-insensitive, with a leading ~ that inverts it (~exp(1..10) yields 10 most often) and
// bounds that take a k, m or b suffix. It knows nothing of profiles or tables.
package dist

import (
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
)

// The distributions of cassandra-stress's user profiles (OptionDistribution): the sizes,
// populations and clustering counts of a profile's columns, and an insert's partitions and
// select ratio. A spec is NAME(min..Max[,params]), case-insensitive, with a leading ~ that
// inverts it (~exp(1..10) yields 10 most often) and bounds that take a k, m or b suffix.

type distKind int

const (
	distFixed distKind = iota
	distUniform
	distGaussian
	distExp
	distExtreme
	distQExtreme
	distSeq
)

// distNames maps each name and alias that cassandra-stress accepts to its kind. Its
// weibull alias points at nothing in cassandra-stress itself (a lookup bug); here it is
// the extreme distribution it names.
var distNames = map[string]distKind{
	"fixed": distFixed, "uniform": distUniform, "seq": distSeq,
	"gaussian": distGaussian, "gauss": distGaussian, "normal": distGaussian, "norm": distGaussian,
	"exp": distExp, "extreme": distExtreme, "extr": distExtreme, "weibull": distExtreme,
	"qextreme": distQExtreme, "qextr": distQExtreme,
}

const distForms = "FIXED(n), UNIFORM(min..Max), SEQ(min..Max), GAUSSIAN(min..Max[,stdvrng]), GAUSSIAN(min..Max,mean,stdev), EXP(min..Max), EXTREME(min..Max,shape) or QEXTREME(min..Max,shape,quantas), with an optional leading ~ and k/m/b suffixes"

// Dist is one parsed distribution. Its sampling methods are safe for concurrent use with
// a random source per caller.
type Dist struct {
	spec     string
	kind     distKind
	Min, Max int64
	inverse  bool
	mean     float64 // gaussian's mean; exp's mean
	stdev    float64 // gaussian
	shape    float64 // extreme, qextreme
	scale    float64 // extreme, qextreme
	quantas  int64   // qextreme
	seq      *atomic.Int64
}

var distRE = regexp.MustCompile(`^(~?)(\w+)\((.*)\)$`)

// Parse parses a distribution spec as cassandra-stress does.
func Parse(s string) (*Dist, error) {
	spec := strings.TrimSpace(s)
	m := distRE.FindStringSubmatch(strings.ReplaceAll(spec, " ", ""))
	if m == nil {
		return nil, fmt.Errorf("distribution %q: want %s", s, distForms)
	}
	kind, ok := distNames[strings.ToLower(m[2])]
	if !ok {
		return nil, fmt.Errorf("distribution %q: unknown name %q; want %s", s, m[2], distForms)
	}
	d := &Dist{spec: spec, kind: kind, inverse: m[1] == "~"}
	params := strings.Split(m[3], ",")
	want := map[distKind][2]int{distFixed: {1, 1}, distUniform: {1, 1}, distSeq: {1, 1},
		distGaussian: {1, 3}, distExp: {1, 1}, distExtreme: {2, 2}, distQExtreme: {3, 3}}[kind]
	why := ""
	switch {
	case len(params) < want[0] || len(params) > want[1]:
		why = fmt.Sprintf("%d parameters", len(params))
	case kind == distFixed:
		why = d.parseFixed(params[0])
	default:
		why = d.parseRange(params[0])
		if why == "" {
			why = d.parseShape(params[1:])
		}
	}
	if why != "" {
		return nil, fmt.Errorf("distribution %q: %s; want %s", s, why, distForms)
	}
	return d, nil
}

// parseFixed reads a fixed distribution's one value, and returns what is wrong with it,
// "" if nothing.
func (d *Dist) parseFixed(param string) string {
	v, err := parseLong(param)
	if err != nil {
		return err.Error()
	}
	d.Min, d.Max = v, v
	return ""
}

// parseRange reads the range min..Max of the first parameter, and returns what is wrong
// with it, "" if nothing.
func (d *Dist) parseRange(param string) string {
	lo, hi, ok := strings.Cut(param, "..")
	if !ok {
		return "the first parameter must be a range min..Max"
	}
	var err error
	if d.Min, err = parseLong(lo); err != nil {
		return err.Error()
	}
	if d.Max, err = parseLong(strings.TrimLeft(hi, ".")); err != nil {
		return err.Error()
	}
	if d.Max < d.Min {
		return "max is below min"
	}
	return ""
}

// parseShape reads the parameters after the range (a gaussian's stdvrng or mean and
// stdev, an extreme's shape, a qextreme's quantas) and sets the distribution's shape from
// them and its range; it returns what is wrong with them, "" if nothing.
func (d *Dist) parseShape(params []string) string {
	floats := make([]float64, len(params))
	for i, p := range params {
		var err error
		if floats[i], err = strconv.ParseFloat(p, 64); err != nil || math.IsNaN(floats[i]) || math.IsInf(floats[i], 0) {
			return fmt.Sprintf("%q is not a number", p)
		}
	}
	// The bound of exp and extreme: the value that all but √(1/(max−min)) of the mass
	// lies below lands on max, as cassandra-stress sets their mean and scale.
	tail := 0.5 * math.Log(math.Max(float64(d.Max-d.Min), 2))
	switch d.kind {
	case distGaussian:
		return d.gaussian(floats)
	case distExp:
		d.mean = float64(d.Max-d.Min) / tail
	case distExtreme, distQExtreme:
		d.shape = floats[0]
		if !(d.shape > 0) {
			return "shape must be positive"
		}
		d.scale = float64(d.Max-d.Min) / math.Pow(tail, 1/d.shape)
		if d.kind == distQExtreme {
			d.quantas = int64(floats[1])
			if float64(d.quantas) != floats[1] || d.quantas < 1 {
				return "quantas must be a positive integer"
			}
		}
	case distSeq:
		d.seq = new(atomic.Int64)
	}
	return ""
}

// gaussian sets a gaussian's mean and stdev: given, or the range's middle and its half
// over stdvrng (3 unless given); it returns what is wrong with them, "" if nothing.
func (d *Dist) gaussian(floats []float64) string {
	switch len(floats) {
	case 2:
		d.mean, d.stdev = floats[0], floats[1]
	default:
		stdvrng := 3.0
		if len(floats) == 1 {
			stdvrng = floats[0]
		}
		if !(stdvrng > 0) {
			return "stdvrng must be positive"
		}
		d.mean = float64(d.Min+d.Max) / 2
		d.stdev = float64(d.Max-d.Min) / 2 / stdvrng
	}
	if d.stdev < 0 {
		return "stdev must not be negative"
	}
	return ""
}

// parseLong reads an integer with cassandra-stress's optional suffix: k (thousand),
// m (million) or b (billion), in either case.
func parseLong(s string) (int64, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return 0, fmt.Errorf("an empty number")
	}
	mult := int64(1)
	switch s[len(s)-1] {
	case 'k':
		mult = 1e3
	case 'm':
		mult = 1e6
	case 'b':
		mult = 1e9
	}
	if mult > 1 {
		s = s[:len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > math.MaxInt64/mult || n < math.MinInt64/mult {
		return 0, fmt.Errorf("%q is not an integer", s)
	}
	return n * mult, nil
}

// String is the spec as given.
func (d *Dist) String() string { return d.spec }

// span is the number of values between min and max.
func (d *Dist) span() int64 { return d.Max - d.Min + 1 }

// Sample draws a value with r. ordinal places a SEQ draw: the partition seed, the
// clustering index or the row index the value is for, or -1 to take the next of the
// distribution's own shared sequence.
func (d *Dist) Sample(r *rand.Rand, ordinal int64) int64 {
	v := d.raw(r, ordinal)
	if d.inverse {
		v = d.Max - (v - d.Min)
	}
	return v
}

func (d *Dist) raw(r *rand.Rand, ordinal int64) int64 {
	switch d.kind {
	case distFixed:
		return d.Min
	case distUniform:
		return d.Min + r.Int64N(d.span())
	case distSeq:
		if ordinal < 0 {
			ordinal = d.seq.Add(1) - 1
		}
		return d.Min + ((ordinal%d.span())+d.span())%d.span()
	case distGaussian:
		return d.clamp(d.mean + r.NormFloat64()*d.stdev)
	case distExp:
		return d.offset(r.ExpFloat64() * d.mean)
	case distExtreme:
		return d.offset(d.weibull(r))
	case distQExtreme:
		// A quantum drawn from the extreme distribution, then a value uniform inside it.
		q := d.offset(d.weibull(r)) - d.Min
		width := max(d.span()/d.quantas, 1)
		lo := d.Min + (q/width)*width
		return min(lo+r.Int64N(width), d.Max)
	}
	return d.Min
}

func (d *Dist) weibull(r *rand.Rand) float64 {
	u := 1 - r.Float64() // (0, 1]
	return d.scale * math.Pow(-math.Log(u), 1/d.shape)
}

// clamp bounds a gaussian draw as cassandra-stress does (DistributionBoundApache): Java's
// (long) cast, which truncates toward zero, then min or max for a value beyond them.
func (d *Dist) clamp(v float64) int64 {
	v = math.Trunc(v)
	switch {
	case math.IsNaN(v) || v <= float64(d.Min):
		return d.Min
	case v >= float64(d.Max):
		return d.Max
	}
	return int64(v)
}

// offset places a draw x ≥ 0 of exp or extreme as cassandra-stress does
// (DistributionOffsetApache): min plus (long) x, at most max − min.
func (d *Dist) offset(x float64) int64 {
	x = math.Trunc(x)
	switch {
	case math.IsNaN(x) || x <= 0:
		return d.Min
	case x >= float64(d.Max-d.Min):
		return d.Max
	}
	return d.Min + int64(x)
}

// Ratio is cassandra-stress's ratio distribution, DIST/DIVISOR, such as
// uniform(1..10)/10: a fraction, as an insert's select.
type Ratio struct {
	d       *Dist
	divisor float64
}

// ParseRatio parses a ratio distribution spec, DIST/DIVISOR.
func ParseRatio(s string) (Ratio, error) {
	i := strings.LastIndex(s, "/")
	if i < 0 {
		return Ratio{}, fmt.Errorf("ratio %q: want DIST/DIVISOR such as uniform(1..10)/10 or fixed(1)/1", s)
	}
	d, err := Parse(s[:i])
	if err != nil {
		return Ratio{}, fmt.Errorf("ratio %q: %v", s, err)
	}
	div, err := strconv.ParseFloat(strings.TrimSpace(s[i+1:]), 64)
	if err != nil || !(div > 0) || math.IsInf(div, 0) {
		return Ratio{}, fmt.Errorf("ratio %q: the divisor %q must be a positive number", s, s[i+1:])
	}
	return Ratio{d: d, divisor: div}, nil
}

// String is the spec, DIST/DIVISOR.
func (r Ratio) String() string {
	return r.d.spec + "/" + strconv.FormatFloat(r.divisor, 'g', -1, 64)
}

// Sample draws a fraction in [0, 1].
func (r Ratio) Sample(rng *rand.Rand) float64 {
	return math.Min(math.Max(float64(r.d.Sample(rng, -1))/r.divisor, 0), 1)
}
