package nodeapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// StorageServiceMBean is Cassandra's StorageService MBean, which holds the trace
// probability and the logging levels.
const StorageServiceMBean = "org.apache.cassandra.db:type=StorageService"

// jolokiaRequest is one request of Jolokia's JSON protocol, sent as the body of a POST to
// the agent's base URL (https://jolokia.org/reference/html/manual/jolokia_protocol.html).
//
// StorageServiceMBean is a JMX standard MBean, so its getter and setter pair
// getTraceProbability/setTraceProbability(double) is the read-write attribute
// TraceProbability, and getLoggingLevels is the read-only attribute LoggingLevels: JMX
// exposes neither as an operation, and an exec of them fails. They are read with
// "read" and written with "write". setLoggingLevel(String,String) takes two arguments, so
// it is an operation, called with "exec". nodetool does the same through its MBean proxy.
type jolokiaRequest struct {
	Type      string `json:"type"`
	MBean     string `json:"mbean"`
	Attribute string `json:"attribute,omitempty"`
	Value     any    `json:"value,omitempty"`
	Operation string `json:"operation,omitempty"`
	Arguments []any  `json:"arguments,omitempty"`
}

// jolokiaResponse is Jolokia's answer: status is 200 on success, with the result in
// value; otherwise error and error_type say what went wrong. The HTTP status is 200 either
// way, so the status field is what counts.
type jolokiaResponse struct {
	Status    int             `json:"status"`
	Value     json.RawMessage `json:"value"`
	Error     string          `json:"error"`
	ErrorType string          `json:"error_type"`
}

// jolokia sends r and decodes the value into out, when out is not nil.
func (c *Client) jolokia(ctx context.Context, r jolokiaRequest, out any) error {
	if r.Type == "write" && r.Value == nil {
		return fmt.Errorf("jolokia write of %s without a value", r.Attribute)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	body, err := c.do(req)
	if err != nil {
		return err
	}
	var resp jolokiaResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		return fmt.Errorf("jolokia %s %s: unexpected answer %q: %w", r.Type, r.Attribute+r.Operation, truncate(body), err)
	}
	if resp.Status != http.StatusOK {
		return &Error{Status: resp.Status, Message: fmt.Sprintf("jolokia %s %s: %s (%s)", r.Type, r.Attribute+r.Operation, resp.Error, resp.ErrorType)}
	}
	if out != nil {
		if err := json.Unmarshal(resp.Value, out); err != nil {
			return fmt.Errorf("jolokia %s %s: unexpected value %q: %w", r.Type, r.Attribute+r.Operation, truncate(resp.Value), err)
		}
	}
	return nil
}

// jolokiaLevels reads the LoggingLevels attribute: logger name to level.
func (c *Client) jolokiaLevels(ctx context.Context) (map[string]string, error) {
	var m map[string]string
	err := c.jolokia(ctx, jolokiaRequest{Type: "read", MBean: StorageServiceMBean, Attribute: "LoggingLevels"}, &m)
	return m, err
}
