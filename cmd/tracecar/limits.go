package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/tracecar/tracecar/internal/cql"
)

// byteSize is a flag of a size in bytes: plain bytes (65536), or a number with one of the
// units B, KiB, MiB, GiB (also KB, MB, GB, K, M, G, all powers of 1024), in any case.
type byteSize struct {
	n        int
	min, max int
}

var sizeUnits = []struct {
	suffix string
	shift  uint
}{
	{"kib", 10}, {"mib", 20}, {"gib", 30},
	{"kb", 10}, {"mb", 20}, {"gb", 30},
	{"k", 10}, {"m", 20}, {"g", 30},
	{"b", 0},
}

// parseByteSize parses s as byteSize describes.
func parseByteSize(s string) (int, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	shift := uint(0)
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, shift = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.shift
			break
		}
	}
	v, err := strconv.ParseUint(t, 10, 32)
	if err != nil || v > 1<<(40-shift) {
		return 0, fmt.Errorf("%q is not a size: want bytes (65536) or a number with KiB, MiB or GiB (64KiB, 16MiB)", s)
	}
	return int(v << shift), nil
}

func (b *byteSize) String() string {
	if b == nil {
		return ""
	}
	switch n := b.n; {
	case n != 0 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + "MiB"
	case n != 0 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + "KiB"
	default:
		return strconv.Itoa(n)
	}
}

func (b *byteSize) Set(s string) error {
	n, err := parseByteSize(s)
	if err != nil {
		return err
	}
	if n < b.min || n > b.max {
		return fmt.Errorf("%s is out of range: want %s to %s", s, (&byteSize{n: b.min}).String(), (&byteSize{n: b.max}).String())
	}
	b.n = n
	return nil
}

// defaultMaxConnections is the default of the sidecar's --max-connections. An idle
// connection holds about 80 KiB in the sidecar (two 16 KiB readers and writers, two
// goroutines), so the default bounds that to about 320 MiB.
const defaultMaxConnections = 4096

// maxProtocolVersionFlag adds --max-protocol-version to fs; check reads it back.
func maxProtocolVersionFlag(fs *flag.FlagSet, what string) *protocolVersion {
	v := &protocolVersion{n: int(cql.MaxVersion)}
	fs.IntVar(&v.n, "max-protocol-version", int(cql.MaxVersion), "highest CQL protocol version "+what+", 3 to 5; a client offering a higher one gets Cassandra's ProtocolError and steps down (4 for nodes without v5: ScyllaDB, Cassandra 3)")
	return v
}

// protocolVersion is the value of --max-protocol-version.
type protocolVersion struct{ n int }

// check returns the version, or a usage error when it is not 3, 4 or 5.
func (v *protocolVersion) check() (int, error) {
	if v.n < int(cql.V3) || v.n > int(cql.MaxVersion) {
		return 0, usageErrorf("--max-protocol-version must be 3, 4 or 5, got %d", v.n)
	}
	return v.n, nil
}

// maxFrameSizeFlag adds --max-frame-size to fs, as Cassandra's native_transport_max_frame_size.
func maxFrameSizeFlag(fs *flag.FlagSet) *byteSize {
	b := &byteSize{n: cql.DefaultMaxFrameSize, min: cql.MaxStartupFrameSize, max: cql.MaxBodySize}
	fs.Var(b, "max-frame-size", "largest CQL frame a client may send, header included, as a `size` (16MiB, 64KiB or bytes; 64KiB to 256MiB); a larger one gets a ProtocolError and its connection closes")
	return b
}
