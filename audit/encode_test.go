package audit

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestEncoderIsAppendJSON: the file sink's encoder writes every record as AppendJSON does
// (itself checked against encoding/json), over a run of records that keep or change their
// second, zone and each string, so that a value kept from the last record is never one
// that changed.
func TestEncoderIsAppendJSON(t *testing.T) {
	odd := []string{"", "plain", `quote " backslash \ slash /`, "<script>&amp;</script>", "tab\tnew\nline\rcr",
		"\x00\x01\x1f\x7f", "é ü 日本", "\u2028\u2029", "bad \xff\xfe utf8", "emoji 🎉"}
	zones := []*time.Location{time.UTC, time.FixedZone("plus", 3600+30*60), time.FixedZone("minus", -5*3600)}
	if ny, err := time.LoadLocation("America/New_York"); err == nil {
		zones = append(zones, ny) // a daylight-saving change: the same zone, another offset
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	pick := func(prev string) string {
		switch rnd.IntN(3) {
		case 0:
			return prev
		case 1:
			return strings.Clone(prev) // the same text in another string
		}
		return odd[rnd.IntN(len(odd))]
	}
	base := time.Date(2026, 3, 8, 6, 59, 58, 0, time.UTC) // New York's clocks go forward at 07:00 UTC
	var e encoder
	var r Record
	for i := range 20000 {
		t0 := base.Add(time.Duration(rnd.IntN(4)) * time.Second)
		switch rnd.IntN(4) {
		case 0: // whole seconds, and trailing zeros to cut
			t0 = t0.Add(time.Duration(rnd.IntN(10)) * time.Millisecond)
		default:
			t0 = t0.Add(time.Duration(rnd.IntN(int(time.Second))))
		}
		if i%1000 == 999 {
			base = base.Add(time.Hour)
		}
		r = Record{EventTime: t0.In(zones[rnd.IntN(len(zones))]), Node: pick(r.Node), Source: pick(r.Source),
			Username: pick(r.Username), Category: pick(r.Category), Operation: pick(r.Operation),
			Keyspace: pick(r.Keyspace), Table: pick(r.Table), Consistency: pick(r.Consistency),
			Error: rnd.IntN(2) == 0, ErrorCode: int32(rnd.IntN(0x3000) - 10), BatchID: pick(r.BatchID)}
		if rnd.IntN(2) == 0 {
			r.EventTime = r.EventTime.Round(0) // without the monotonic reading, as a record read back
		}
		want := string(r.AppendJSON(nil))
		if got := string(e.append(nil, &r)); got != want {
			t.Fatalf("record %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

// TestEncoderAllocs: a run of records like a workload's allocates nothing once the
// encoder has seen its strings.
func TestEncoderAllocs(t *testing.T) {
	var e encoder
	r := rec(1)
	buf := e.append(nil, &r)
	if n := testing.AllocsPerRun(1000, func() {
		r.EventTime = r.EventTime.Add(time.Microsecond)
		buf = e.append(buf[:0], &r)
	}); n != 0 {
		t.Errorf("encoder: %v allocs; want 0", n)
	}
}
