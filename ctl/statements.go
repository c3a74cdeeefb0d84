package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/tracecar/tracecar/statements"
)

// statementsCmd runs "ctl statements": it reads every host's statement statistics with
// their histograms and prints them merged by statement (counts add up, histograms merge,
// percentiles are read from the merged histogram), sorted and cut to --limit.
func statementsCmd(ctx context.Context, c *common, args []string, stdout io.Writer) (int, error) {
	fs := newFlagSet("statements")
	c.register(fs)
	order := fs.String("sort", "total_time", "sort by total_time, calls, p99 or errors")
	limit := fs.Int("limit", 20, "statements shown")
	asJSON := fs.Bool("json", false, "print the merged statements as JSON")
	if err := parseFlags(fs, args); err != nil {
		return 0, err
	}
	if fs.NArg() > 0 {
		return 0, usageErr("statements takes no arguments, got %q", fs.Args())
	}
	if !contains(statements.SortOrders, *order) {
		return 0, usageErr("--sort %q: want one of %s", *order, strings.Join(statements.SortOrders, ", "))
	}
	if *limit < 1 {
		return 0, usageErr("--limit must be at least 1, got %d", *limit)
	}
	hosts, err := parseHosts(c.hosts)
	if err != nil {
		return 0, err
	}
	cl, err := newClient(c.token, c.cacert)
	if err != nil {
		return 0, err
	}
	lists := make([][]statements.Statement, len(hosts))
	errs := make([]error, len(hosts))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Go(func() { lists[i], errs[i] = cl.statements(ctx, h) })
	}
	wg.Wait()
	code := ExitOK
	var ok [][]statements.Statement
	for i, err := range errs {
		if err != nil {
			code = ExitFailed
			fmt.Fprintf(stdout, "%s: error: %v\n", strings.TrimPrefix(hosts[i], "http://"), err)
			continue
		}
		ok = append(ok, lists[i])
	}
	merged, complete := statements.Merge(ok...)
	if !complete {
		return ExitFailed, fmt.Errorf("a host sent statements without histogram buckets: it cannot be merged")
	}
	statements.SortStatements(merged, *order)
	if len(merged) > *limit {
		merged = merged[:*limit]
	}
	if *asJSON {
		if merged == nil {
			merged = []statements.Statement{}
		}
		b, err := json.MarshalIndent(merged, "", "  ")
		if err != nil {
			return ExitFailed, err
		}
		fmt.Fprintf(stdout, "%s\n", b)
		return code, nil
	}
	printStatements(stdout, merged, len(ok))
	return code, nil
}

// statements reads one host's statements, all of them, with histogram buckets.
func (c *client) statements(ctx context.Context, base string) ([]statements.Statement, error) {
	b, err := c.request(ctx, http.MethodGet, base+"/tracecar/statement_stats", nil)
	if err != nil {
		return nil, err
	}
	var st struct {
		Max int `json:"max"`
	}
	if err := json.Unmarshal(b, &st); err != nil || st.Max < 1 {
		return nil, fmt.Errorf("bad statement_stats response %q", b)
	}
	b, err = c.request(ctx, http.MethodGet, base+"/tracecar/statements?sort=calls&histogram=true&limit="+strconv.Itoa(st.Max), nil)
	if err != nil {
		return nil, err
	}
	var out []statements.Statement
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("bad statements response: %w", err)
	}
	return out, nil
}

// maxShownText bounds the statement text in the table.
const maxShownText = 70

func printStatements(w io.Writer, sts []statements.Statement, hosts int) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "CALLS\tERRORS\tTOTAL_MS\tMEAN_US\tP50_US\tP99_US\tP999_US\tMAX_US\tROWS\tPREP\t  STATEMENT")
	for _, s := range sts {
		text := s.Statement
		if len(text) > maxShownText {
			text = text[:maxShownText] + "…"
		}
		prep := "no"
		if s.Prepared {
			prep = "yes"
		}
		fmt.Fprintf(tw, "%d\t%d\t%.1f\t%.0f\t%d\t%d\t%d\t%d\t%d\t%s\t  %s\n", s.Calls, s.ErrorCount(),
			float64(s.TotalTimeUS)/1000, s.MeanUS, s.P50US, s.P99US, s.P999US, s.MaxUS, s.Rows, prep, text)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d statements merged from %d hosts\n", len(sts), hosts)
}
