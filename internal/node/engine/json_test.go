package engine

import (
	"math/big"
	"strings"
	"testing"

	"github.com/tracecar/tracecar/internal/node/cqlvalue"
	"github.com/tracecar/tracecar/internal/node/grammar"
)

func TestJavaNumbers(t *testing.T) {
	floats := []struct {
		v    float64
		bits int
		want string
	}{
		{1.5, 64, "1.5"}, {100, 64, "100.0"}, {0.001, 64, "0.001"}, {1e-4, 64, "1.0E-4"}, {1e7, 64, "1.0E7"},
		{9999999, 64, "9999999.0"}, {-2.25, 64, "-2.25"}, {0, 64, "0.0"}, {123456789.125, 64, "1.23456789125E8"},
		{0.1, 32, "0.1"}, {2.5, 32, "2.5"},
	}
	for _, tc := range floats {
		if got := cqlvalue.JavaFloat(tc.v, tc.bits); got != tc.want {
			t.Errorf("javaFloat(%v, %d) = %s; want %s", tc.v, tc.bits, got, tc.want)
		}
	}
	decimals := []struct {
		u     int64
		scale int32
		want  string
	}{
		{1250, 2, "12.50"}, {5, 0, "5"}, {-5, 3, "-0.005"}, {1, -3, "1E+3"}, {123, 10, "1.23E-8"}, {0, 2, "0.00"},
	}
	for _, tc := range decimals {
		if got := cqlvalue.JavaDecimal(big.NewInt(tc.u), tc.scale); got != tc.want {
			t.Errorf("javaDecimal(%d, %d) = %s; want %s", tc.u, tc.scale, got, tc.want)
		}
	}
}

func TestDurationCodec(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 63, 64, -65, 1 << 20, -(1 << 40), 1<<62 + 5} {
		b := grammar.AppendVint(nil, v)
		got, rest, ok := grammar.ReadVint(b)
		if !ok || got != v || len(rest) != 0 {
			t.Errorf("vint %d: encoded %x, read %d %v", v, b, got, ok)
		}
	}
	// Cassandra's encodings: zigzag, then the extra bytes counted in the first byte.
	for v, want := range map[int64]string{1: "02", -1: "01", 64: "8080", -8193: "c04001"} {
		if got := string(grammar.AppendVint(nil, v)); got != string(mustHex(want)) {
			t.Errorf("vint %d = %x; want %s", v, got, want)
		}
	}
	texts := map[string]string{"1h30m": "1h30m", "P1Y2M3DT4H5M6S": "1y2mo3d4h5m6s", "3w": "21d", "-90s": "-1m30s",
		"1µs": "1us", "PT0S": "", "12mo": "1y"}
	for in, want := range texts {
		d, err := grammar.ParseDuration(in)
		if err != nil || d.String() != want {
			t.Errorf("duration %s: %v %v; want %s", in, d, err, want)
		}
	}
	for _, bad := range []string{"1x", "h", "P", "PT", "1h2"} {
		if _, err := grammar.ParseDuration(bad); err == nil {
			t.Errorf("duration %q: parsed; want an error", bad)
		}
	}
}

func TestJSONValues(t *testing.T) {
	e, s := newTestEngine(t, "CREATE TABLE j (k int PRIMARY KEY, v text)")
	_ = s
	tb := e.schema.Load().Table("ks", "j")
	for _, bad := range []string{"[1]", "{", `{"k": 1} x`, "null"} {
		_, _, err := jsonValues(tb, bad, false)
		if ce := cqlErr(err); ce == nil || !strings.HasPrefix(ce.Message, "Could not decode JSON string as a map: ") {
			t.Errorf("%s: got %v; want Cassandra's could-not-decode error", bad, err)
		}
	}
}

func mustHex(s string) []byte {
	b := make([]byte, len(s)/2)
	for i := range b {
		b[i] = hexNibble(s[2*i])<<4 | hexNibble(s[2*i+1])
	}
	return b
}

func hexNibble(c byte) byte {
	if c >= 'a' {
		return c - 'a' + 10
	}
	return c - '0'
}
