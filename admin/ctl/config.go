package ctl

import (
	"errors"
	"net/url"
	"time"
)

// What one ctl invocation is (Config, filled by the tracecar command), the command it
// runs, and the limits every request to a host keeps.

// ErrHostFailed is returned by Run when a host failed; the table says which and why.
var ErrHostFailed = errors.New("a host failed")

// The commands.
const (
	SlowQuery        = "slow-query"
	TraceProbability = "trace-probability"
	Logger           = "logger"
	Status           = "status"
	Statements       = "statements"   // merged per-statement statistics (see statements.go)
	TraceFilter      = "trace-filter" // the trace filter
	Top              = "top"          // the live view (see top.go)
	Ready            = "ready"        // GET /readyz: exit 0 only when every host's node is reachable
	Capture          = "capture"      // the workload capture: start, stop or status (see capture.go)
	Audit            = "audit"        // the audit log: its settings, sinks and drops (see audit.go)
	TraceFloor       = "trace-floor"  // the trace floor (see trace_floor.go)
)

// Command is what ctl does on every host: an optional change, then a read of the state it
// changed.
type Command struct {
	Name   string     // SlowQuery, TraceProbability, Logger or Status
	Logger string     // the Logger command's logger; "" reads every logger's level
	Change url.Values // the parameters of the change; nil only reads

	Clear bool // TraceFilter and TraceFloor: remove the filter, turn the floor off

	// Statements and Top: the order (adminapi.SortOrders), how many are shown, and
	// JSON output (Statements only).
	Sort  string
	Limit int
	JSON  bool
	// SlowLog: the filters, as GET /tracecar/slow_log takes them (Sort and Limit are
	// the command's own). Trace: the session id.
	Query   url.Values
	Session string

	// IncludeSystem shows the queries of the node's own keyspaces (system, system_schema…),
	// which the drivers send on their own; Statements and Top hide them by default.
	IncludeSystem bool

	// Top: the refresh interval (0: DefaultTopInterval), the per-host rows, and how many
	// refreshes to show before returning (0: until quit).
	Interval time.Duration
	PerHost  bool
	Count    int
}

// Config is one ctl invocation. The tracecar command fills it from the command line.
type Config struct {
	Hosts   []string // admin API base URLs, such as http://127.0.0.1:10000
	Token   string   // bearer token, sent when set
	CACert  string   // PEM file of the CA of an HTTPS API; empty: the system's
	Command Command

	// HostsFromCQL, when set, is the HOST:PORT of one sidecar's CQL port: Hosts are then
	// the admin APIs of every sidecar listed in its system.local and system.peers, each on
	// the sidecar's IP at AdminPort (empty means DefaultPort).
	HostsFromCQL string
	AdminPort    string
}

// DefaultPort is added to a host given without one.
const DefaultPort = "10000"

// Timeout bounds each HTTP request to a host.
const Timeout = 5 * time.Second
