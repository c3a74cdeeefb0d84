package ctl

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"golang.org/x/term"
)

// runTop runs top against cfg's hosts until ctx is done, q is pressed, or Count refreshes
// have been shown: full-screen when stdout is a terminal, else plain lines.
func runTop(ctx context.Context, cfg Config, stdout io.Writer) error {
	cmd := cfg.Command
	if cmd.Interval <= 0 {
		cmd.Interval = DefaultTopInterval
	}
	if cmd.Sort == "" {
		cmd.Sort = "total_time"
	}
	if !slices.Contains(TopSortOrders, cmd.Sort) {
		return fmt.Errorf("ctl: sort %q: want one of %s", cmd.Sort, strings.Join(TopSortOrders, ", "))
	}
	cl, err := newClient(cfg.Token, cfg.CACert)
	if err != nil {
		return err
	}
	t := &top{cl: cl, hosts: cfg.Hosts, cmd: cmd}
	if f, ok := stdout.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return t.screen(ctx)
	}
	return t.plain(ctx, stdout)
}
