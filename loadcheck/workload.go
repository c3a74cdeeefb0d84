package loadcheck

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/tracecar/tracecar/loadcheck/replay"
)

// The cassandra-stress default schema: keyspace1.standard1 with a blob key and five
// 34-byte blob columns.
const (
	keyLen   = 10
	colCount = 5
	colLen   = 34

	cqlKeyspace = `CREATE KEYSPACE IF NOT EXISTS keyspace1 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}`
	cqlTable    = `CREATE TABLE IF NOT EXISTS keyspace1.standard1 (key blob PRIMARY KEY, "C0" blob, "C1" blob, "C2" blob, "C3" blob, "C4" blob)`
	cqlInsert   = `INSERT INTO keyspace1.standard1 (key, "C0", "C1", "C2", "C3", "C4") VALUES (?, ?, ?, ?, ?, ?)`
	cqlSelect   = `SELECT * FROM keyspace1.standard1 WHERE key = ?`
)

type popKind int

const (
	popSeq popKind = iota
	popUniform
	popGaussian
)

// population picks partition keys, as cassandra-stress's -pop does.
type population struct {
	kind     popKind
	min, max int64
	stdvrng  float64       // gaussian: stdev = (max−min)/2/stdvrng, as in cassandra-stress
	seq      *atomic.Int64 // seq: the next offset, shared by all workers of a run
}

var popRE = regexp.MustCompile(`^(?:dist=)?(?:seq=([^.]+)\.\.(.+)|(uniform|gaussian|seq)\(([^.]+)\.\.([^,)]+)(?:,([^)]+))?\))$`)

// parsePop parses seq=A..B, uniform(A..B), gaussian(A..B) and gaussian(A..B,STDVRNG).
// Bounds take an optional k, m or b suffix (thousand, million, billion).
func parsePop(s string) (population, error) {
	bad := func(why string) (population, error) {
		return population{}, usageErrorf("--pop %q: %s; want seq=1..N, uniform(1..N) or gaussian(1..N)", s, why)
	}
	m := popRE.FindStringSubmatch(strings.ReplaceAll(strings.TrimSpace(s), " ", ""))
	if m == nil {
		return bad("unknown form")
	}
	p := population{kind: popSeq, stdvrng: 3}
	lo, hi := m[1], m[2]
	if m[3] != "" {
		lo, hi = m[4], m[5]
		switch m[3] {
		case "uniform":
			p.kind = popUniform
		case "gaussian":
			p.kind = popGaussian
		}
	}
	var err error
	if p.min, err = parseCount(lo); err != nil {
		return bad(err.Error())
	}
	if p.max, err = parseCount(hi); err != nil {
		return bad(err.Error())
	}
	if p.min < 0 || p.max < p.min {
		return bad("want 0 ≤ min ≤ max")
	}
	if m[6] != "" {
		if p.kind != popGaussian {
			return bad("only gaussian takes a third parameter")
		}
		if p.stdvrng, err = strconv.ParseFloat(m[6], 64); err != nil || !(p.stdvrng > 0) || math.IsInf(p.stdvrng, 0) {
			return bad("the gaussian's stdvrng must be a positive number")
		}
	}
	return p, nil
}

// parseCount parses a non-negative integer with an optional k, m or b suffix.
func parseCount(s string) (int64, error) {
	mult := int64(1)
	switch strings.ToLower(s[len(s)-1:]) {
	case "k":
		mult, s = 1e3, s[:len(s)-1]
	case "m":
		mult, s = 1e6, s[:len(s)-1]
	case "b":
		mult, s = 1e9, s[:len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is not a count", s)
	}
	return n * mult, nil
}

func (p population) String() string {
	switch p.kind {
	case popUniform:
		return fmt.Sprintf("uniform(%d..%d)", p.min, p.max)
	case popGaussian:
		return fmt.Sprintf("gaussian(%d..%d,%g)", p.min, p.max, p.stdvrng)
	}
	return fmt.Sprintf("seq=%d..%d", p.min, p.max)
}

// size is the number of distinct keys.
func (p population) size() int64 { return p.max - p.min + 1 }

// fresh returns a copy with its own sequence, for one run.
func (p population) fresh() population {
	p.seq = new(atomic.Int64)
	return p
}

// next picks a key. r belongs to the calling worker.
func (p *population) next(r *rand.Rand) int64 {
	switch p.kind {
	case popUniform:
		return p.min + r.Int64N(p.size())
	case popGaussian:
		mean := float64(p.min+p.max) / 2
		sd := float64(p.max-p.min) / 2 / p.stdvrng
		for i := 0; i < 100; i++ {
			v := math.Round(mean + r.NormFloat64()*sd)
			if v >= float64(p.min) && v <= float64(p.max) {
				return int64(v)
			}
		}
		return int64(mean)
	}
	return p.min + (p.seq.Add(1)-1)%p.size()
}

// putKey writes k as keyLen decimal digits, so that keys are readable in cqlsh.
func putKey(b []byte, k int64) {
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = byte('0' + k%10)
		k /= 10
	}
}

// fillValues fills the column values with pseudo-random bytes.
func fillValues(r *rand.Rand, cols [][]byte) {
	for _, c := range cols {
		i := 0
		for ; i+8 <= len(c); i += 8 {
			binary.LittleEndian.PutUint64(c[i:], r.Uint64())
		}
		if i < len(c) {
			var tail [8]byte
			binary.LittleEndian.PutUint64(tail[:], r.Uint64())
			copy(c[i:], tail[:])
		}
	}
}

// workload is what each operation does: which keys, and writes or reads.
type workload struct {
	name      string // write, read or mixed
	writeFrac float64
	pop       population
	// traceContext is the W3C trace context each request carries in its custom payload:
	// TraceContextSampled, TraceContextUnsampled, or "" and TraceContextNone for none.
	traceContext string
	// replay is the capture a replay plays, nil for the built-in workloads.
	replay *replay.Replay
	// profile is the user profile a profile workload runs, and stats its operations'
	// figures in the current run.
	profile *profile
	stats   *profileStats
}

// ReplayPrefix starts a --workload that replays a capture file.
const ReplayPrefix = "replay:"

// parseWorkload builds the workload from the Workload, Ratio and Pop settings.
func parseWorkload(cfg *Config) (*workload, error) {
	w := &workload{name: cfg.Workload}
	if path, ok := strings.CutPrefix(cfg.Workload, ReplayPrefix); ok {
		if cfg.Profile != "" {
			return nil, usageErrorf("--profile and --workload replay:FILE: give one workload")
		}
		if cfg.Ratio != "" {
			return nil, usageErrorf("--ratio applies to --workload mixed, not a replay")
		}
		rp, err := replay.Load(path, replay.Options{Speed: cfg.ReplaySpeed, Rate: cfg.Rate, Keyspace: cfg.ReplayKeyspace})
		if errors.Is(err, replay.ErrUsage) {
			return nil, usageErrorf("%v", err)
		}
		if err != nil {
			return nil, err
		}
		w.name, w.replay = "replay", rp
		return w, nil
	}
	if cfg.ReplaySpeed != "" || cfg.ReplayConnections != 0 {
		return nil, usageErrorf("--replay-speed and --replay-connections apply to --workload replay:FILE")
	}
	if cfg.Profile != "" {
		return parseProfileWorkload(cfg)
	}
	if cfg.OpsMix != "" {
		return nil, usageErrorf("--ops %q: an operations mix needs --profile FILE.yaml (the built-in workloads take --workload and --ratio; --ops N is -n)", cfg.OpsMix)
	}
	switch cfg.Workload {
	case "write":
		w.writeFrac = 1
	case "read":
		w.writeFrac = 0
	case "mixed":
		wr, rd, err := parseRatio(cfg.Ratio)
		if err != nil {
			return nil, err
		}
		w.writeFrac = wr / (wr + rd)
	default:
		return nil, usageErrorf("--workload %q: want write, read, mixed or replay:FILE (a capture file)", cfg.Workload)
	}
	if cfg.Ratio != "" && cfg.Workload != "mixed" {
		return nil, usageErrorf("--ratio applies to --workload mixed, not %s", cfg.Workload)
	}
	p, err := parsePop(cfg.Pop)
	if err != nil {
		return nil, err
	}
	w.pop = p
	return w, nil
}

// parseRatio parses write=W,read=R, also written ratio(write=W,read=R).
func parseRatio(s string) (write, read float64, err error) {
	if s == "" {
		s = DefaultRatio
	}
	in := strings.TrimSpace(s)
	if r, ok := strings.CutPrefix(in, "ratio("); ok {
		in, ok = strings.CutSuffix(r, ")")
		if !ok {
			return 0, 0, usageErrorf("--ratio %q: unbalanced parenthesis", s)
		}
	}
	seen := map[string]bool{}
	for _, part := range strings.Split(in, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		f, perr := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if !ok || perr != nil || f < 0 || math.IsInf(f, 0) || seen[k] {
			return 0, 0, usageErrorf("--ratio %q: want write=W,read=R with non-negative weights", s)
		}
		seen[k] = true
		switch strings.TrimSpace(k) {
		case "write", "insert":
			write = f
		case "read":
			read = f
		default:
			return 0, 0, usageErrorf("--ratio %q: unknown operation %q; want write and read", s, k)
		}
	}
	if !(write+read > 0) {
		return 0, 0, usageErrorf("--ratio %q: the weights add up to zero", s)
	}
	return write, read, nil
}

// parseProfileWorkload loads --profile and its --ops mix.
func parseProfileWorkload(cfg *Config) (*workload, error) {
	switch cfg.Workload {
	case "", DefaultWorkload, "profile":
	default:
		return nil, usageErrorf("--workload %s and --profile: a profile's operations are its --ops mix; give one workload", cfg.Workload)
	}
	if cfg.Ratio != "" {
		return nil, usageErrorf("--ratio applies to --workload mixed; a profile's mix is --ops, such as insert=1,read1=9")
	}
	p, err := loadProfile(cfg.Profile)
	if err != nil {
		return nil, err
	}
	if err := p.parseMix(cfg.OpsMix); err != nil {
		return nil, err
	}
	pop, err := parsePop(cfg.Pop)
	if err != nil {
		return nil, err
	}
	w := &workload{name: "profile", profile: p, pop: pop}
	for _, o := range p.mix {
		if o.query == nil {
			w.writeFrac += o.weight
		}
	}
	total := 0.0
	for _, o := range p.mix {
		total += o.weight
	}
	w.writeFrac /= total
	return w, nil
}
