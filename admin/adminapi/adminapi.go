// Package adminapi is the one home of the JSON shapes of tracecar's admin REST API, and a
// client of it and of the node's API, which serves the same logger and trace-probability
// endpoints. The server (package admin, on fasthttp) encodes only the types declared here
// (every one is a Shape), and the clients, tracecar ctl and the load checker, decode
// them, so that neither declares a shape of its own nor imports the engine's types.
//
// The client speaks plain net/http.
package adminapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Paths of the endpoints this package decodes.
const (
	PathSlowQuery    = "/storage_service/slow_query"
	PathProbability  = "/storage_service/trace_probability"
	PathLoggingLevel = "/storage_service/logging_level"
	PathLoggers      = "/system/logger"
	PathStatus       = "/tracecar/status"
)

// DefaultTimeout bounds one request when Client.HTTP is nil.
const DefaultTimeout = 10 * time.Second

// Client sends requests to admin APIs. The zero value uses an http.Client with
// DefaultTimeout and sends no token. It is safe for concurrent use.
type Client struct {
	HTTP  *http.Client // nil: one with DefaultTimeout
	Token string       // bearer token, sent when set
}

// Error is a non-2xx answer, with the API's message when it sent one.
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Status, e.Message) }

// Do sends method to u, with form form-encoded in the body when it is not nil, and returns
// the body of a 2xx answer; any other status is an *Error.
func (c *Client) Do(ctx context.Context, method, u string, form url.Values) ([]byte, error) {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: DefaultTimeout}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		var e ErrorBody
		if json.Unmarshal(b, &e) == nil && e.Message != "" {
			return nil, &Error{Status: resp.StatusCode, Message: e.Message}
		}
		return nil, &Error{Status: resp.StatusCode, Message: strings.TrimSpace(string(b))}
	}
	return b, nil
}

// BaseURL accepts "http://host:port", "host:port" (http) and a trailing slash, and returns
// the URL without the slash; "" stays "".
func BaseURL(s string) string {
	if s == "" {
		return ""
	}
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	return strings.TrimRight(s, "/")
}

// SlowQuery is the JSON of GET /storage_service/slow_query, in Scylla's field order:
// Threshold in microseconds, TTL in seconds.
type SlowQuery struct {
	Enable    bool  `json:"enable"`
	TTL       int64 `json:"ttl"`
	Threshold int64 `json:"threshold"`
	Fast      bool  `json:"fast"`
}

// ParseSlowQuery decodes a slow_query body; every field must be there.
func ParseSlowQuery(body []byte) (SlowQuery, error) {
	var sq struct {
		Enable    *bool  `json:"enable"`
		Fast      *bool  `json:"fast"`
		Threshold *int64 `json:"threshold"`
		TTL       *int64 `json:"ttl"`
	}
	if err := json.Unmarshal(body, &sq); err != nil {
		return SlowQuery{}, badBody(PathSlowQuery, body, err)
	}
	if sq.Enable == nil || sq.Fast == nil || sq.Threshold == nil || sq.TTL == nil {
		return SlowQuery{}, badBody(PathSlowQuery, body, errors.New("want enable, fast, threshold and ttl"))
	}
	return SlowQuery{Enable: *sq.Enable, Fast: *sq.Fast, Threshold: *sq.Threshold, TTL: *sq.TTL}, nil
}

// Form returns the parameters that POST /storage_service/slow_query takes to set sq.
func (sq SlowQuery) Form() url.Values {
	return url.Values{
		"enable": {strconv.FormatBool(sq.Enable)}, "fast": {strconv.FormatBool(sq.Fast)},
		"threshold": {strconv.FormatInt(sq.Threshold, 10)}, "ttl": {strconv.FormatInt(sq.TTL, 10)},
	}
}

// String formats sq as ctl shows it.
func (sq SlowQuery) String() string {
	return fmt.Sprintf("enable=%v fast=%v threshold=%v ttl=%v", sq.Enable, sq.Fast,
		time.Duration(sq.Threshold)*time.Microsecond, time.Duration(sq.TTL)*time.Second)
}

// ParseProbability decodes a trace_probability body, a bare number in [0, 1]. It returns
// the number as the API wrote it, so that setting it back restores it exactly.
func ParseProbability(body []byte) (string, error) {
	var n json.Number
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.UseNumber()
	if err := dec.Decode(&n); err != nil {
		return "", badBody(PathProbability, body, err)
	}
	p, err := strconv.ParseFloat(n.String(), 64)
	if err != nil || p < 0 || p > 1 {
		return "", badBody(PathProbability, body, errors.New("want a number from 0 to 1"))
	}
	return n.String(), nil
}

// ParseLevel decodes GET /system/logger/{name}: a JSON string.
func ParseLevel(body []byte) (string, error) {
	var l string
	if err := json.Unmarshal(body, &l); err != nil {
		return "", badBody(PathLoggers+"/{name}", body, err)
	}
	return l, nil
}

// ParseLoggers decodes GET /system/logger: the logger names.
func ParseLoggers(body []byte) ([]string, error) {
	var names []string
	if err := json.Unmarshal(body, &names); err != nil {
		return nil, badBody(PathLoggers, body, err)
	}
	return names, nil
}

// LoggerLevel is one entry of GET /storage_service/logging_level, Scylla's "mapper" shape.
type LoggerLevel struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// LoggerLevels is the JSON of GET /storage_service/logging_level.
type LoggerLevels []LoggerLevel

// ParseLoggingLevels decodes GET /storage_service/logging_level.
func ParseLoggingLevels(body []byte) ([]LoggerLevel, error) {
	var kv []LoggerLevel
	if err := json.Unmarshal(body, &kv); err != nil {
		return nil, badBody(PathLoggingLevel, body, err)
	}
	return kv, nil
}

func badBody(path string, body []byte, err error) error {
	return fmt.Errorf("unexpected %s body %q: %w", path, strings.TrimSpace(string(body)), err)
}

// PathTraceFloor is the trace floor's endpoint.
const PathTraceFloor = "/tracecar/trace_floor"

// TraceFloor is the JSON of GET, POST and DELETE /tracecar/trace_floor: the trace floor in
// force. Interval is a Go duration ("60s"), "0s" when the floor is off.
type TraceFloor struct {
	Enabled      bool    `json:"enabled"`
	Interval     string  `json:"interval"`
	IntervalS    float64 `json:"interval_s"`
	MaxPerSecond int     `json:"max_per_second"`
}

func (LoggerLevels) shape() {}
func (SlowQuery) shape()    {}
func (TraceFloor) shape()   {}
