package guardrail

import (
	"testing"
)

// TestMeter checks that a Meter counts the CPU of the work between Begin and End, once,
// and that counting allocates nothing, as the tracing path needs.
func TestMeter(t *testing.T) {
	var m Meter
	mark := m.Begin()
	x := 0
	for i := range 1_000_000 {
		x += i * i
	}
	m.End(mark)
	cpu, ops, ok := m.CPU()
	if !ok {
		t.Skipf("no thread CPU clock on this platform (x = %d)", x)
	}
	if cpu <= 0 || ops != 1 {
		t.Errorf("counted %v over %d pieces; want some CPU over 1", cpu, ops)
	}
	if n := testing.AllocsPerRun(100, func() { m.End(m.Begin()) }); n != 0 {
		t.Errorf("%v allocations per Begin/End; want 0", n)
	}
}
