package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestParseByteSize(t *testing.T) {
	tests := []struct {
		in   string
		want int
		err  bool
	}{
		{"16MiB", 16 << 20, false},
		{"64KiB", 64 << 10, false},
		{"65536", 65536, false},
		{"1gib", 1 << 30, false},
		{"2 MB", 2 << 20, false},
		{"512B", 512, false},
		{"", 0, true},
		{"-1", 0, true},
		{"1.5MiB", 0, true},
		{"16 furlongs", 0, true},
		{"99999999999GiB", 0, true},
	}
	for _, tt := range tests {
		got, err := parseByteSize(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestMaxFrameSizeFlag(t *testing.T) {
	for _, args := range [][]string{{"--max-frame-size", "16 furlongs"}, {"--max-frame-size", "1KiB"}, {"--max-frame-size", "1GiB"}} {
		var out strings.Builder
		err := runNode(t.Context(), append(args, "--listen", "127.0.0.1:0", "--api", ""), &out, &out)
		if err == nil || !strings.Contains(err.Error(), "max-frame-size") {
			t.Errorf("node %v: error %v, want a usage error naming --max-frame-size", args, err)
		}
	}
}

func TestMaxProtocolVersionFlag(t *testing.T) {
	for _, v := range []string{"2", "6"} {
		for name, run := range map[string]func(context.Context, []string, io.Writer, io.Writer) error{"node": runNode, "sidecar": runSidecar} {
			var out strings.Builder
			args := []string{"--max-protocol-version", v, "--listen", "127.0.0.1:0"}
			if name == "node" {
				args = append(args, "--api", "")
			} else {
				args = append(args, "--admin", "127.0.0.1:0", "--node", "127.0.0.1:1")
			}
			err := run(t.Context(), args, &out, &out)
			if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "max-protocol-version") {
				t.Errorf("%s --max-protocol-version %s: error %v, want a usage error naming --max-protocol-version", name, v, err)
			}
		}
	}
}
