package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/tracecar/tracecar/internal/node"
)

// memoryLimit is the value of --memory-limit: the bytes the embedded node's tables may
// hold, 0 for no limit. Its default is a quarter of the memory the process may use: the
// cgroup's limit when there is one, else the machine's.
type memoryLimit struct {
	n   int64
	set bool   // given on the command line
	why string // where the default comes from, for the start-up line
}

// Minimum and maximum of a --memory-limit other than 0.
const (
	minMemoryLimit = 1 << 20
	maxMemoryLimit = 1 << 40
)

// fallbackMemoryLimit is the default when neither the cgroup nor /proc/meminfo says how
// much memory there is.
const fallbackMemoryLimit = 2 << 30

// memoryLimitFlag adds --memory-limit to fs, for a node; what says which one.
func memoryLimitFlag(fs *flag.FlagSet, what string) *memoryLimit {
	m := &memoryLimit{}
	m.n, m.why = defaultMemoryLimit()
	fs.Var(m, "memory-limit", "the most the "+what+"'s tables may hold in memory, as a `size` (64MiB, 2GiB; 1MiB to 1TiB; 0: no limit): "+
		"a write past it gets the CQL error Overloaded, reads, DELETE, TRUNCATE and DROP still work (default a quarter of the machine's memory, or of the cgroup's limit, which the start-up line prints)")
	return m
}

// String returns the limit as the flag takes it, once given; the default, which depends
// on the machine, is empty, so that usage describes it in words.
func (m *memoryLimit) String() string {
	if m == nil || !m.set {
		return ""
	}
	return m.arg()
}

// Set parses a size (64MiB, 2GiB, or bytes), or 0 for no limit.
func (m *memoryLimit) Set(s string) error {
	t := strings.ToLower(strings.TrimSpace(s))
	shift := uint(0)
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, shift = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.shift
			break
		}
	}
	v, err := strconv.ParseUint(t, 10, 64)
	if err != nil || v > maxMemoryLimit>>shift {
		return fmt.Errorf("%q is not a size: want 0 (no limit), or 1MiB to 1TiB as bytes or a number with KiB, MiB or GiB (64MiB, 2GiB)", s)
	}
	n := int64(v << shift)
	if n != 0 && n < minMemoryLimit {
		return fmt.Errorf("%s is out of range: want 0 (no limit) or 1MiB to 1TiB", s)
	}
	m.n, m.set, m.why = n, true, "--memory-limit"
	return nil
}

// describe says what the limit is and where it comes from, for the start-up line.
func (m *memoryLimit) describe() string {
	if m.n == 0 {
		return "no memory limit (--memory-limit 0)"
	}
	return "memory limit " + node.FormatBytes(m.n) + " (" + m.why + ")"
}

// arg returns the limit as a --memory-limit argument, for a child node.
func (m *memoryLimit) arg() string { return strconv.FormatInt(m.n, 10) }

// defaultMemoryLimit returns a quarter of the memory this process may use, and says where
// that comes from.
func defaultMemoryLimit() (int64, string) {
	if n := cgroupMemoryLimit(); n > 0 {
		return max(n/4&^(1<<20-1), minMemoryLimit), "default: a quarter of the cgroup's limit of " + node.FormatBytes(n)
	}
	if n := machineMemory(); n > 0 {
		return max(n/4&^(1<<20-1), minMemoryLimit), "default: a quarter of the machine's " + node.FormatBytes(n)
	}
	return fallbackMemoryLimit, "default: the machine's memory is unknown"
}

// cgroupMemoryLimit returns the memory limit of this process's cgroup (v2's memory.max or
// v1's memory.limit_in_bytes), or 0 when there is none.
func cgroupMemoryLimit() int64 {
	var paths []string
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			parts := strings.SplitN(sc.Text(), ":", 3)
			if len(parts) != 3 {
				continue
			}
			switch {
			case parts[0] == "0" && parts[1] == "":
				paths = append(paths, filepath.Join("/sys/fs/cgroup", parts[2], "memory.max"))
			case strings.Contains(parts[1], "memory"):
				paths = append(paths, filepath.Join("/sys/fs/cgroup/memory", parts[2], "memory.limit_in_bytes"))
			}
		}
	}
	paths = append(paths, "/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
	machine := machineMemory()
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || n <= 0 || (machine > 0 && n >= machine) { // "max", or v1's "unlimited"
			continue
		}
		return n
	}
	return 0
}

// machineMemory returns MemTotal from /proc/meminfo, or 0.
func machineMemory() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(v)
			if len(f) == 2 && f[1] == "kB" {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n << 10
			}
		}
	}
	return 0
}

// nodeGCMemoryLimit sets the runtime's soft memory limit to node.RuntimeLimit of the node's,
// unless GOMEMLIMIT is set: with GOGC at nodeGCPercent the heap would otherwise grow to
// several times what the tables hold before a collection (a 2 GB table made 7.7 GB of RSS).
// The tables hold node.TableShare eighths of the limit at most, which leaves the runtime
// room to collect; with the soft limit so set, the engine holds the live heap to that share
// too (its estimate alone fell short).
func nodeGCMemoryLimit(limit int64) {
	if _, ok := os.LookupEnv("GOMEMLIMIT"); ok || limit == 0 {
		return
	}
	debug.SetMemoryLimit(node.RuntimeLimit(limit))
}
