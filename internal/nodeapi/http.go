package nodeapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// Error is an answer from the node that refused the request (HTTP 4xx, or a Jolokia
// status other than 200). Other failures (no answer, 5xx) are plain errors.
type Error struct {
	// Status is the node's HTTP status, or Jolokia's status field.
	Status int
	// Message is the node's message.
	Message string
}

// Error describes the refusal.
func (e *Error) Error() string { return fmt.Sprintf("node answered %d: %s", e.Status, e.Message) }

// Rejected reports whether the node judged the request itself wrong (a 4xx status), so
// that the caller can answer 400 rather than 502.
func (e *Error) Rejected() bool { return e.Status >= 400 && e.Status < 500 }

// Client talks to one node's API. Create it with New.
type Client struct {
	kind  string
	base  string
	token string
	hc    *http.Client
}

// rest calls a Scylla-style endpoint: parameters in the query string, a JSON answer.
func (c *Client) rest(ctx context.Context, method, path string, q url.Values, out any) error {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return err
	}
	body, err := c.do(req)
	if err != nil {
		return err
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			return fmt.Errorf("%s %s on the node: unexpected answer %q: %w", method, path, truncate(body), err)
		}
	}
	return nil
}

// do sends req and returns the body of a 2xx answer, an *Error for a 4xx, and a plain
// error otherwise.
func (c *Client) do(req *http.Request) ([]byte, error) {
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("node API %s: %w", c.kind, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("node API %s: read answer: %w", c.kind, err)
	}
	if resp.StatusCode/100 == 2 {
		return body, nil
	}
	msg := string(bytes.TrimSpace(body))
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &e) == nil && e.Message != "" {
		msg = e.Message
	}
	if resp.StatusCode/100 == 4 {
		return nil, &Error{Status: resp.StatusCode, Message: msg}
	}
	return nil, fmt.Errorf("node API %s: %s %s: %s: %s", c.kind, req.Method, req.URL.Path, resp.Status, truncate([]byte(msg)))
}

func truncate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}
