package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/tracecar/tracecar/internal/capturefile"
	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/logs"
	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/capture"
)

// The workload capture: the sidecar's --capture-dir and `tracecar capture dump|stats FILE`
// (`tracecar ctl capture` is ctl.go's).

func addCaptureFlags(fs *flag.FlagSet, cfg *stackConfig) {
	fs.StringVar(&cfg.CaptureDir, "capture-dir", "", "`DIR` for workload captures (POST /tracecar/capture, tracecar ctl capture), created with mode 0700, files 0600; empty refuses captures")
}

// newCapture returns the sidecar's workload capture. A directory that cannot be created
// or written is an error now, naming it, rather than at the first capture.
func newCapture(cfg stackConfig, node string, reg *tracing.Statements, schema capture.SchemaSource, lr *logs.Registry) (*capture.Capture, error) {
	if cfg.CaptureDir != "" {
		if err := capture.CheckDir(cfg.CaptureDir); err != nil {
			return nil, fmt.Errorf("--capture-dir: %w", err)
		}
	}
	return capture.New(capture.Config{Dir: cfg.CaptureDir, Statements: reg, Schema: schema, Node: node,
		Logger: lr.Logger(logs.Tracing)}), nil
}

const captureUsage = `usage: tracecar capture dump FILE     print the capture's entries as JSON lines
       tracecar capture stats [--json] FILE
                                      statements by count, keys by frequency, sizes,
                                      the read/write mix and the recorded latency
exit codes: 0 ok, 1 a file that cannot be read (named, with what is wrong), 2 usage error
`

// runCapture runs `tracecar capture dump|stats FILE`. The file is read and checked whole
// before anything is printed, so that a truncated or corrupt file prints its error alone.
func runCapture(_ context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, captureUsage)
		return usageErrorf("capture: want dump or stats")
	}
	fs := newFlagSet("capture "+args[0], stderr)
	fs.Usage = func() { fmt.Fprint(stderr, captureUsage) }
	asJSON := false
	switch args[0] {
	case "dump":
	case "stats":
		fs.BoolVar(&asJSON, "json", false, "print the summary as JSON")
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, captureUsage)
		return nil
	default:
		fmt.Fprint(stderr, captureUsage)
		return usageErrorf("capture %q: want dump or stats", args[0])
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageErrorf("%v", err)
	}
	if fs.NArg() != 1 {
		return usageErrorf("capture %s: want one FILE, got %d arguments", args[0], fs.NArg())
	}
	c, err := capturefile.ReadFile(fs.Arg(0))
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(stdout)
	defer bw.Flush()
	if args[0] == "dump" {
		return dumpCapture(bw, c)
	}
	s := capturefile.Summarize(c)
	if asJSON {
		b, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(bw, "%s\n", b)
		return nil
	}
	printSummary(bw, c, s)
	return nil
}

// dumpValue is one value of a record in a dump.
type dumpValue struct {
	Type string `json:"type,omitempty"`
	Len  int32  `json:"len"`
	// Text or Hex is the value itself, with values=keep only.
	Text *string `json:"text,omitempty"`
	Hex  string  `json:"hex,omitempty"`
}

type dumpPart struct {
	Statement uint32      `json:"statement"`
	Values    []dumpValue `json:"values,omitempty"`
	Key       string      `json:"key,omitempty"`
}

type dumpRecord struct {
	Type        string     `json:"type"`
	TimeUS      int64      `json:"t_us"`
	Conn        uint32     `json:"conn"`
	Protocol    byte       `json:"protocol_version,omitempty"`
	Op          string     `json:"op"`
	Keyspace    string     `json:"keyspace,omitempty"`
	Consistency string     `json:"consistency,omitempty"`
	Serial      string     `json:"serial_consistency,omitempty"`
	PageSize    *int32     `json:"page_size,omitempty"`
	Flags       byte       `json:"query_flags,omitempty"`
	BatchType   *int       `json:"batch_type,omitempty"`
	Parts       []dumpPart `json:"parts,omitempty"`
	Response    string     `json:"response"`
	Result      string     `json:"result,omitempty"`
	ErrorCode   string     `json:"error_code,omitempty"`
	Rows        *int32     `json:"rows,omitempty"`
	LatencyUS   int64      `json:"latency_us"`
	ReqBytes    uint32     `json:"request_bytes"`
	RespBytes   uint32     `json:"response_bytes"`
}

var resultKinds = map[int32]string{capturefile.ResultVoid: "void", capturefile.ResultRows: "rows",
	capturefile.ResultSetKeyspace: "set_keyspace", capturefile.ResultPrepared: "prepared", capturefile.ResultSchemaChange: "schema_change"}

// dumpCapture prints the capture as JSON lines: the header, the schema, the statements,
// the records (with each value's type), and the end.
func dumpCapture(w io.Writer, c *capturefile.Capture) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	line := func(kind string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "{\"type\":%q,%s\n", kind, b[1:])
		return nil
	}
	if err := line("header", c.Header); err != nil {
		return err
	}
	for _, k := range c.Keyspaces {
		line("keyspace", k)
	}
	for _, t := range c.Tables {
		line("table", t)
	}
	for id := uint32(1); int(id) <= len(c.Statements); id++ {
		if s := c.Statements[id]; s != nil {
			line("statement", s)
		}
	}
	for i := range c.Records {
		r := &c.Records[i]
		d := dumpRecord{Type: "record", TimeUS: r.AtUS, Conn: r.Conn, Protocol: r.ProtocolVersion, Op: cql.Opcode(r.Opcode).String(), Keyspace: r.Keyspace,
			Flags: r.QueryFlags, Response: cql.Opcode(r.RespOpcode).String(), LatencyUS: r.LatencyUS, ReqBytes: r.ReqBytes, RespBytes: r.RespBytes}
		if r.Consistency >= 0 {
			d.Consistency = cql.Consistency(r.Consistency).String()
		}
		if r.Serial >= 0 {
			d.Serial = cql.Consistency(r.Serial).String()
		}
		if r.PageSize >= 0 {
			d.PageSize = &r.PageSize
		}
		if r.BatchType >= 0 {
			d.BatchType = &r.BatchType
		}
		switch r.RespOpcode {
		case capturefile.OpResult:
			d.Result = resultKinds[r.ResultKind]
		case capturefile.OpError:
			d.ErrorCode = fmt.Sprintf("0x%04x", r.ErrorCode)
		}
		if r.Rows >= 0 {
			d.Rows = &r.Rows
		}
		for _, p := range r.Parts {
			dp := dumpPart{Statement: p.Statement}
			if p.Key != nil {
				dp.Key = hex.EncodeToString(p.Key)
			}
			st := c.Statements[p.Statement]
			for j, n := range p.Lens {
				v := dumpValue{Len: n}
				if st != nil && j < len(st.Values) {
					v.Type = st.Values[j].Type
				}
				if j < len(p.Values) && p.Values[j] != nil {
					if b := p.Values[j]; utf8.Valid(b) && printable(b) {
						s := string(b)
						v.Text = &s
					} else {
						v.Hex = hex.EncodeToString(b)
					}
				}
				dp.Values = append(dp.Values, v)
			}
			d.Parts = append(d.Parts, dp)
		}
		if err := enc.Encode(d); err != nil {
			return err
		}
	}
	return line("end", c.End)
}

func printable(b []byte) bool {
	for _, r := range string(b) {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// printSummary prints the stats of a capture for a person.
func printSummary(w io.Writer, c *capturefile.Capture, s capturefile.Summary) {
	h := c.Header
	fmt.Fprintf(w, "capture of %s, started %s by %s, values=%s; ended %s (%s)\n", h.Node, h.StartedAt.Format(time.RFC3339),
		h.TracecarVersion, h.Values, c.End.EndedAt.Format(time.RFC3339), c.End.Reason)
	fmt.Fprintf(w, "%d records over %.1f s: %.0f statements/s; %d dropped (queue full); %d errors\n",
		s.Records, s.SpanS, s.OpRate, s.Dropped, s.Errors)
	fmt.Fprintf(w, "protocol versions: %s\n", counted(s.ProtocolVersions))
	fmt.Fprintf(w, "mix: %d reads, %d writes", s.Reads, s.Writes)
	for _, v := range []string{"select", "insert", "update", "delete", "batch", "use", "ddl", "other"} {
		if n := s.Mix[v]; n > 0 {
			fmt.Fprintf(w, ", %s %d", v, n)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "latency at the sidecar, µs: mean %.0f, p50 %d, p95 %d, p99 %d, p99.9 %d, max %d\n",
		s.Latency.Mean, s.Latency.P50, s.Latency.P95, s.Latency.P99, s.Latency.P999, s.Latency.Max)
	fmt.Fprintf(w, "request bytes: mean %.0f, p99 %d, max %d; response bytes: mean %.0f, p99 %d, max %d\n\n",
		s.ReqBytes.Mean, s.ReqBytes.P99, s.ReqBytes.Max, s.RespBytes.Mean, s.RespBytes.P99, s.RespBytes.Max)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "COUNT\tSHARE\tERRORS\tROWS\tP50_US\tP99_US\tPREP\tCONSISTENCY\tPAGE_SIZE\t  STATEMENT")
	for _, st := range s.Statements {
		prep := "no"
		if st.Prepared {
			prep = "yes"
		}
		text := st.Text
		if len(text) > 90 {
			text = text[:90] + "…"
		}
		fmt.Fprintf(tw, "%d\t%.1f%%\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t  %s\n", st.Count, st.SharePct, st.Errors, st.Rows, st.P50US, st.P99US, prep,
			counted(st.Consistency), counted(st.PageSizes), text)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nkeys: %d distinct among %d statements with a known partition key; the hottest (keyed hashes, not values):\n", s.Keys.Distinct, s.Keys.WithKey)
	for _, k := range s.Keys.Top {
		fmt.Fprintf(w, "  %s  %6d  %5.2f%%\n", k.Key, k.Count, k.SharePct)
	}
	if len(s.Values) > 0 {
		var parts []string
		for _, v := range s.Values {
			parts = append(parts, fmt.Sprintf("%s %d (mean %.0f B, max %d B, %d null)", v.Type, v.Count, v.MeanLen, v.MaxLen, v.Nulls))
		}
		fmt.Fprintf(w, "bound values: %s\n", strings.Join(parts, "; "))
	}
}

// counted prints counts by name, the largest first: "LOCAL_ONE 120, QUORUM 3", or "-".
func counted(m map[string]int) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b)) })
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = k + " " + strconv.Itoa(m[k])
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}
