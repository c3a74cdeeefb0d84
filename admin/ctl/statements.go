package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/tracecar/tracecar/admin/adminapi"
)

// runStatements reads every host's statement statistics with their histograms and prints
// them merged by statement (counts add up, histograms merge, percentiles are read from the
// merged histogram), sorted by cfg.Command.Sort and cut to its Limit. A host that cannot be
// read is reported, the others are still merged, and ErrHostFailed is returned.
func runStatements(ctx context.Context, cfg Config, stdout io.Writer) error {
	cmd := cfg.Command
	if cmd.Sort == "" {
		cmd.Sort = "total_time"
	}
	if !slices.Contains(adminapi.SortOrders, cmd.Sort) {
		return fmt.Errorf("ctl: sort %q: want one of %s", cmd.Sort, strings.Join(adminapi.SortOrders, ", "))
	}
	if cmd.Limit < 1 {
		cmd.Limit = 20
	}
	cl, err := newClient(cfg.Token, cfg.CACert)
	if err != nil {
		return err
	}
	lists := make([][]adminapi.Statement, len(cfg.Hosts))
	on := make([]bool, len(cfg.Hosts))
	errs := make([]error, len(cfg.Hosts))
	var wg sync.WaitGroup
	for i, h := range cfg.Hosts {
		wg.Go(func() { lists[i], on[i], errs[i] = cl.statements(ctx, h) })
	}
	wg.Wait()
	var failed error
	var ok [][]adminapi.Statement
	off := 0
	for i, err := range errs {
		host := strings.TrimPrefix(cfg.Hosts[i], "http://")
		switch {
		case err != nil:
			failed = ErrHostFailed
			fmt.Fprintf(stdout, "%s: error: %v\n", host, err)
			continue
		case !on[i] && !slices.ContainsFunc(lists[i], func(s adminapi.Statement) bool { return s.LastTraceID != "" }):
			off++
			fmt.Fprintf(stdout, "%s: statement statistics are off: turn them on with curl -X POST '%s/tracecar/statement_stats?enable=true' (or start the sidecar with --statement-stats)\n",
				host, cfg.Hosts[i])
		}
		ok = append(ok, lists[i])
	}
	if off > 0 && off == len(ok) && failed == nil {
		return ErrStatsOff
	}
	merged, complete := adminapi.Merge(ok...)
	if !complete {
		return errors.New("ctl: a host sent statements without histogram buckets: they cannot be merged")
	}
	if !cmd.IncludeSystem {
		merged = slices.DeleteFunc(merged, func(s adminapi.Statement) bool { return adminapi.IsSystemKeyspace(s.Keyspace) })
	}
	adminapi.SortStatements(merged, cmd.Sort)
	if len(merged) > cmd.Limit {
		merged = merged[:cmd.Limit]
	}
	if cmd.JSON {
		if merged == nil {
			merged = []adminapi.Statement{}
		}
		b, err := json.MarshalIndent(merged, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s\n", b)
		return failed
	}
	printStatements(stdout, merged, len(ok))
	return failed
}

// ErrStatsOff is returned by a statements command when no host it read keeps statement
// statistics: there is nothing to show, and the output says how to turn them on.
var ErrStatsOff = errors.New("ctl: statement statistics are off on every host")

// statements reads one host's statements, all of them, with histogram buckets, and
// whether its statistics are on.
func (c *client) statements(ctx context.Context, base string) ([]adminapi.Statement, bool, error) {
	max, on, err := c.statementStats(ctx, base)
	if err != nil {
		return nil, false, err
	}
	if max < 1 {
		return nil, false, nil // no statement statistics on this host
	}
	b, err := c.request(ctx, http.MethodGet, base+adminapi.PathStatements+"?sort=calls&histogram=true&limit="+strconv.Itoa(max), nil)
	if err != nil {
		return nil, on, err
	}
	var out []adminapi.Statement
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, on, fmt.Errorf("bad statements response: %w", err)
	}
	return out, on, nil
}

// maxShownText bounds the statement text in the table.
const maxShownText = 70

func printStatements(w io.Writer, sts []adminapi.Statement, hosts int) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "CALLS\tERRORS\tTOTAL_MS\tMEAN_US\tP50_US\tP99_US\tP999_US\tMAX_US\tROWS\tPREP\tLAST_TRACE\t  STATEMENT")
	for _, s := range sts {
		text := s.Statement
		if len(text) > maxShownText {
			text = text[:maxShownText] + "…"
		}
		prep := "no"
		if s.Prepared {
			prep = "yes"
		}
		last := "-"
		if s.LastTraceID != "" {
			last = s.LastTraceID
		}
		fmt.Fprintf(tw, "%d\t%d\t%.1f\t%.0f\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t  %s\n", s.Calls, s.ErrorCount(),
			float64(s.TotalTimeUS)/1000, s.MeanUS, s.P50US, s.P99US, s.P999US, s.MaxUS, s.Rows, prep, last, text)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d statements merged from %d hosts\n", len(sts), hosts)
}
