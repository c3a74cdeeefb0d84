package adminapi

import "strconv"

// Shape is a JSON shape of the admin API: a type declared in this package, which the
// server encodes and the clients decode. Its method is unexported, so that no other
// package can declare one; the server writes only Shapes, and TestShapesAreDeclaredHere
// checks that every type a Shape holds is declared here too.
type Shape interface{ shape() }

// Health is the JSON of GET /healthz ("ok") and GET /readyz ("ready").
type Health struct {
	Status string `json:"status"`
}

// ErrorBody is the JSON of every error answer, {"code":400,"message":"…"}, the shape
// Scylla's API uses. As a Go error it is its message: the server's handlers return it.
type ErrorBody struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	// Outcomes says, for a change applied to the sidecar and to the node, what happened on
	// each side ("sidecar", "node").
	Outcomes map[string]string `json:"outcomes,omitempty"`
}

// Error returns the message.
func (e *ErrorBody) Error() string { return e.Message }

// Loggers is the JSON of GET /system/logger: the logger names.
type Loggers []string

// Level is the JSON of GET /system/logger/{name}: a level, as a JSON string.
type Level string

// NodeState is one node in GET /tracecar/nodes.
type NodeState struct {
	Node int  `json:"node"`
	Up   bool `json:"up"`
}

// NodeStates is the JSON of GET /tracecar/nodes.
type NodeStates []NodeState

func (Health) shape()     {}
func (ErrorBody) shape()  {}
func (Loggers) shape()    {}
func (Level) shape()      {}
func (NodeStates) shape() {}

// Probability is the JSON of GET /storage_service/trace_probability: a bare number, such
// as 0.25, written in the shortest form that reads back the same.
type Probability float64

// MarshalJSON writes p as ScyllaDB does.
func (p Probability) MarshalJSON() ([]byte, error) {
	return strconv.AppendFloat(nil, float64(p), 'g', -1, 64), nil
}

func (Probability) shape() {}
