package loadcheck

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gocql/gocql"
)

// A profile's preload is sized in bytes: before writing, it estimates a partition's bytes
// from the profile's columnspec (by making a sample of partitions and rows as the runs
// will), and writes as many partitions as fit its budget, unless --preload forces a count.

// DefaultPreloadBytes is the preload's byte budget, as the node counts its tables' bytes
// (internal/node's memory limit), when no budget is derived from the node's limit: against
// a deployment, or when Config.NodeMemoryLimit is 0. With a known limit the budget is
// PreloadFraction of it, up to this.
const DefaultPreloadBytes = 256 << 20

// PreloadFraction is the part of the node's memory limit the default preload may fill,
// leaving the rest to the runs' own inserts.
const PreloadFraction = 8 // one eighth

// preloadProgressEvery is how often the preload reports its progress on Config.Stderr.
const preloadProgressEvery = 5 * time.Second

// The preload's expected pace, for the plan's duration: the LWT example's shape (3 KB rows)
// preloaded at 16,000 rows/s, 48 MiB/s, with the embedded node on the 2-core VM
// (docs/loadcheck.md); the slower of the two bounds the plan.
const (
	preloadRowsPerSecond  = 16_000
	preloadBytesPerSecond = 48 << 20
)

// The node's estimate of what a partition, a row, a clustering value and a cell value
// hold beside their bytes (internal/node/storage/storage.go and memory.go: struct sizes, a
// map entry, slice headers, allocation rounding), so that the plan's size is the one its
// limit counts.
const (
	nodePartitionBytes = 216
	nodeRowBytes       = 88
	nodeCellBytes      = 48
	nodeKeyValueBytes  = 32
	nodeValueBytes     = 8
)

// preloadSample is the most partitions, and rows in each, the estimate makes.
const preloadSample = 32

// preloadPlan is what a preload writes.
type preloadPlan struct {
	partitions, rows int64
	bytes            int64   // estimated, as the node counts them
	partBytes        float64 // the mean of one partition, its rows included
	rowsPer          float64 // the mean rows per partition
	budget           int64   // the byte budget, 0 when --preload forced the count
	limit            int64   // the node's memory limit, 0 when unknown or none
}

// estimatePartition returns the mean rows of a partition and its mean bytes, as the node
// counts them, from a sample of the population's partitions.
func (p *profile) estimatePartition(pop population) (rowsPer, bytesPer float64) {
	g := newGen()
	var part ppart
	n := min(pop.size(), preloadSample)
	cells := int64(len(p.t.regular))
	var rows, bytes float64
	for k := range n {
		seed := pop.min + k*max(pop.size()/n, 1)
		g.partition(p.t, seed, &part)
		pb := float64(nodePartitionBytes)
		for _, v := range part.key {
			pb += float64(len(v))
		}
		step := max(part.rows/preloadSample, 1)
		var sampled, rb float64
		for i := int64(0); i < part.rows && sampled < preloadSample; i += step {
			b := int64(nodeRowBytes) + cells*nodeCellBytes
			for _, c := range p.t.ck {
				b += nodeKeyValueBytes + int64(len(g.colValue(p.t, c, &part, i)))
			}
			for _, c := range p.t.regular {
				b += nodeValueBytes + int64(len(g.colValue(p.t, c, &part, i)))
			}
			rb += float64(b)
			sampled++
		}
		rows += float64(part.rows)
		bytes += pb + rb/sampled*float64(part.rows)
	}
	return rows / float64(n), bytes / float64(n)
}

// preloadPlan sizes the preload from a sample of the profile's partitions (sizePreload).
func (c *checker) preloadPlan() preloadPlan {
	rowsPer, bytesPer := c.wl.profile.estimatePartition(c.wl.pop)
	pl := preloadPlan{rowsPer: rowsPer, partBytes: bytesPer, limit: c.cfg.NodeMemoryLimit}
	return sizePreload(pl, c.cfg.Preload, c.wl.pop.size())
}

// sizePreload sets the plan's partitions, rows and bytes: preload's count when positive
// (--preload), none when negative, else as many partitions as fit the byte budget (at
// least one); never more than pop, the population's size.
func sizePreload(pl preloadPlan, preload, pop int64) preloadPlan {
	switch {
	case preload < 0:
		return pl
	case preload > 0:
		pl.partitions = min(pop, preload)
	default:
		pl.budget = DefaultPreloadBytes
		if pl.limit > 0 {
			pl.budget = min(pl.limit/PreloadFraction, DefaultPreloadBytes)
		}
		pl.partitions = min(pop, max(int64(float64(pl.budget)/pl.partBytes), 1))
	}
	pl.rows = int64(float64(pl.partitions) * pl.rowsPer)
	pl.bytes = int64(float64(pl.partitions) * pl.partBytes)
	return pl
}

// duration is how long the plan should take at the preload's expected pace.
func (pl preloadPlan) duration() time.Duration {
	s := max(float64(pl.rows)/preloadRowsPerSecond, float64(pl.bytes)/preloadBytesPerSecond)
	return time.Duration(s * float64(time.Second)).Round(100 * time.Millisecond)
}

// String describes the plan, for the line printed before the preload.
func (pl preloadPlan) String() string {
	how := "--preload " + commas(float64(pl.partitions))
	if pl.budget > 0 {
		how = "as many as fit a budget of " + formatBytes(pl.budget)
		if pl.limit > 0 {
			how += fmt.Sprintf(" (1/%d of the node's --memory-limit %s)", PreloadFraction, formatBytes(pl.limit))
		}
		how += "; --preload N forces a count"
	}
	return fmt.Sprintf("%s partitions, %s rows, about %s (%s a partition); %s; expected to take about %s",
		commas(float64(pl.partitions)), commas(float64(pl.rows)), formatBytes(pl.bytes), formatBytes(int64(pl.partBytes)), how, pl.duration())
}

// checkPreload refuses a plan that cannot fit the node's memory limit, before writing.
func (pl preloadPlan) check() error {
	if pl.limit > 0 && pl.bytes > pl.limit {
		return usageErrorf("preload: %s partitions need about %s, more than the node's --memory-limit %s: give a smaller --preload (at most about %s) or a larger --memory-limit",
			commas(float64(pl.partitions)), formatBytes(pl.bytes), formatBytes(pl.limit), commas(float64(int64(float64(pl.limit)/pl.partBytes))))
	}
	return nil
}

// preloadProgress reports the preload's progress on w after a second (at most every), and
// then every interval until stop is closed: partitions, rows, estimated bytes, the rate and
// the time left. The first report comes early so that even a short preload shows its pace.
func preloadProgress(w io.Writer, every time.Duration, pl preloadPlan, parts, rows *atomic.Int64, started time.Time, stop <-chan struct{}) {
	if w == nil {
		return
	}
	t := time.NewTimer(min(every, time.Second))
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			t.Reset(every)
		}
		el := time.Since(started).Seconds()
		r, d := rows.Load(), parts.Load()
		rate := float64(r) / el
		left := "unknown"
		if r > 0 && pl.rows > r {
			left = time.Duration(float64(pl.rows-r) / rate * float64(time.Second)).Round(time.Second).String()
		}
		fmt.Fprintf(w, "preload: %s of %s partitions, %s rows, about %s, %s rows/s, about %s left\n",
			commas(float64(d)), commas(float64(pl.partitions)), commas(float64(r)),
			formatBytes(int64(float64(r)/max(pl.rowsPer, 1)*pl.partBytes)), commas(rate), left)
	}
}

// overloaded reports whether err is the node's Overloaded error (its memory limit).
func overloaded(err error) bool {
	var re gocql.RequestError
	return errors.As(err, &re) && re.Code() == gocql.ErrCodeOverloaded
}

// memoryFullNote returns a warning when runs had writes refused for the node's memory limit
// (their first error names --memory-limit): an in-memory node fills under a long write load,
// and the runs past that point measure refusals, not writes. It is empty otherwise.
func (c *checker) memoryFullNote() string {
	var runs []string
	var errs int64
	for mi, rs := range c.runs {
		for _, rr := range rs {
			if strings.Contains(rr.FirstError, "--memory-limit") {
				runs = append(runs, fmt.Sprintf("%s round %d", c.modes[mi].name, rr.Round))
				errs += rr.Errors
			}
		}
	}
	if len(runs) == 0 {
		return ""
	}
	return fmt.Sprintf("warning: the node's memory limit refused writes (%s errors) in %d runs (%s): its tables were full, so those runs measured refusals; give the node a larger --memory-limit, or fewer or shorter rounds (--max-time, --duration)",
		commas(float64(errs)), len(runs), strings.Join(runs, ", "))
}

// formatBytes writes n bytes in binary units, as --memory-limit takes them.
func formatBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	f, u := float64(n), 0
	for f >= 1024 && u < len(units)-1 {
		f /= 1024
		u++
	}
	if u == 0 || f >= 100 || f == float64(int64(f)) {
		return fmt.Sprintf("%.0f %s", f, units[u])
	}
	return fmt.Sprintf("%.1f %s", f, units[u])
}
