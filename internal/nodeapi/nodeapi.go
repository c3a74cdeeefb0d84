// Package nodeapi controls a CQL node's own tracing and logging over its management API,
// so that one call to the sidecar's admin API reaches the node too. There are three kinds:
//
//   - scylla: ScyllaDB's REST API (api/storage_service.cc, api/system.cc), forwarded as
//     it is;
//   - tracecar: the embedded node's API, which serves the same endpoints;
//   - cassandra-jolokia: Apache Cassandra's StorageService MBean through Jolokia's
//     HTTP/JSON bridge to JMX.
//
// A Client is safe for concurrent use.
//
// The files, from the ground up: http.go holds the Client and its exchange with the node
// (a request, the node's refusal as an Error), jolokia.go Jolokia's protocol over it, and
// nodeapi.go the kinds, New, and each control as each kind does it.
package nodeapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Kinds of node API, as --node-kind names them.
const (
	KindScylla   = "scylla"
	KindJolokia  = "cassandra-jolokia"
	KindTracecar = "tracecar"
)

// Kinds lists the kinds, for messages.
var Kinds = []string{KindScylla, KindJolokia, KindTracecar}

// ErrUnsupported is returned for a change the node's kind has no API for, such as
// slow_query on Cassandra.
var ErrUnsupported = errors.New("not supported by this node kind")

// Config configures a Client.
type Config struct {
	// Kind is one of Kinds.
	Kind string
	// URL is the base URL: http://host:10000 for Scylla, http://host:8778/jolokia for
	// Jolokia, the --api URL of the embedded node.
	URL string
	// Token, when set, is sent as "Authorization: Bearer TOKEN".
	Token string
	// HTTP is the client to use; nil means one with a 10 s timeout.
	HTTP *http.Client
}

// New validates cfg and returns a Client.
func New(cfg Config) (*Client, error) {
	switch cfg.Kind {
	case KindScylla, KindJolokia, KindTracecar:
	default:
		return nil, fmt.Errorf("node kind %q: want one of %s", cfg.Kind, strings.Join(Kinds, ", "))
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("node API URL %q: want http://HOST:PORT[/path]", cfg.URL)
	}
	c := &Client{kind: cfg.Kind, base: strings.TrimRight(cfg.URL, "/"), token: cfg.Token, hc: cfg.HTTP}
	if c.hc == nil {
		c.hc = &http.Client{Timeout: 10 * time.Second}
	}
	return c, nil
}

// Kind returns the node's kind.
func (c *Client) Kind() string { return c.kind }

// URL returns the base URL.
func (c *Client) URL() string { return c.base }

// TraceProbability returns the node's trace probability.
func (c *Client) TraceProbability(ctx context.Context) (float64, error) {
	if c.kind == KindJolokia {
		var v float64
		err := c.jolokia(ctx, jolokiaRequest{Type: "read", MBean: StorageServiceMBean, Attribute: "TraceProbability"}, &v)
		return v, err
	}
	var v float64
	err := c.rest(ctx, http.MethodGet, "/storage_service/trace_probability", nil, &v)
	return v, err
}

// SetTraceProbability sets the node's trace probability.
func (c *Client) SetTraceProbability(ctx context.Context, p float64) error {
	if c.kind == KindJolokia {
		return c.jolokia(ctx, jolokiaRequest{Type: "write", MBean: StorageServiceMBean, Attribute: "TraceProbability", Value: p}, nil)
	}
	return c.rest(ctx, http.MethodPost, "/storage_service/trace_probability",
		url.Values{"probability": {strconv.FormatFloat(p, 'g', -1, 64)}}, nil)
}

// SetSlowQuery sets the node's slow-query logging: threshold in µs, ttl in s. Only
// ScyllaDB has one: other kinds return ErrUnsupported.
func (c *Client) SetSlowQuery(ctx context.Context, enable, fast bool, thresholdMicros, ttlSeconds int64) error {
	if c.kind != KindScylla {
		return fmt.Errorf("slow_query on a %s node: %w", c.kind, ErrUnsupported)
	}
	return c.rest(ctx, http.MethodPost, "/storage_service/slow_query", url.Values{
		"enable":    {strconv.FormatBool(enable)},
		"fast":      {strconv.FormatBool(fast)},
		"threshold": {strconv.FormatInt(thresholdMicros, 10)},
		"ttl":       {strconv.FormatInt(ttlSeconds, 10)},
	}, nil)
}

// Loggers returns the names of the node's loggers. For Cassandra these are the loggers
// with a level of their own (getLoggingLevels).
func (c *Client) Loggers(ctx context.Context) ([]string, error) {
	if c.kind == KindJolokia {
		m, err := c.jolokiaLevels(ctx)
		if err != nil {
			return nil, err
		}
		names := make([]string, 0, len(m))
		for n := range m {
			names = append(names, n)
		}
		slices.Sort(names)
		return names, nil
	}
	var names []string
	err := c.rest(ctx, http.MethodGet, "/system/logger", nil, &names)
	return names, err
}

// Level returns one logger's level, in lower case.
func (c *Client) Level(ctx context.Context, name string) (string, error) {
	if c.kind == KindJolokia {
		m, err := c.jolokiaLevels(ctx)
		if err != nil {
			return "", err
		}
		l, ok := m[name]
		if !ok {
			return "", &Error{Status: http.StatusNotFound, Message: fmt.Sprintf("logger %q has no level of its own on the node", name)}
		}
		return strings.ToLower(l), nil
	}
	var l string
	err := c.rest(ctx, http.MethodGet, "/system/logger/"+url.PathEscape(name), nil, &l)
	return l, err
}

// SetLevel sets one logger's level (error, warn, info, debug or trace).
func (c *Client) SetLevel(ctx context.Context, name, level string) error {
	if c.kind == KindJolokia {
		return c.jolokia(ctx, jolokiaRequest{Type: "exec", MBean: StorageServiceMBean, Operation: "setLoggingLevel",
			Arguments: []any{name, strings.ToUpper(level)}}, nil)
	}
	return c.rest(ctx, http.MethodPost, "/system/logger/"+url.PathEscape(name), url.Values{"level": {level}}, nil)
}
