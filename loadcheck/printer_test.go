package loadcheck

import (
	"strings"
	"testing"
)

func TestPrinterProgress(t *testing.T) {
	tests := []struct {
		name     string
		progress bool
		want     string
	}{
		// On a terminal the progress line is erased before each line of output and at the end.
		{"terminal", true, "a\n\r\x1b[K[1/2] off\r\x1b[Kb\n\r\x1b[K[2/2] fast\r\x1b[K"},
		// Elsewhere it never appears.
		{"pipe", false, "a\nb\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			p := newPrinter(&b, tt.progress)
			p.printf("a\n")
			p.status("[1/2] off")
			p.printf("b\n")
			p.status("[2/2] fast")
			p.clearStatus()
			if got := b.String(); got != tt.want {
				t.Errorf("output = %q; want %q", got, tt.want)
			}
		})
	}
}
