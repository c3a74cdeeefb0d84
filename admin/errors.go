package admin

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/tracecar/tracecar/admin/adminapi"

	"github.com/tracecar/tracecar/tracing"
	"github.com/tracecar/tracecar/tracing/capture"
	"github.com/tracecar/tracecar/tracing/guardrail"
)

// Error is an API error: an HTTP status and a message for a person, sent as the API's
// error shape (adminapi.ErrorBody).
type Error = adminapi.ErrorBody

// errorf returns an *Error with status code.
func errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// badParam is the 400 for parameter name with value v, saying what is allowed.
func badParam(name, v, want string) *Error {
	return errorf(http.StatusBadRequest, "bad %s %q: want %s", name, v, want)
}

// statusOf maps an error from a handler or from the tracer to an HTTP status and the
// message sent. It is the one place where errors become statuses.
func statusOf(err error) *Error {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, tracing.ErrInvalidConfig), errors.Is(err, guardrail.ErrInvalidBudget), errors.Is(err, capture.ErrInvalid):
		return &Error{Code: http.StatusBadRequest, Message: err.Error()}
	case errors.Is(err, capture.ErrRunning), errors.Is(err, capture.ErrNoDir):
		return &Error{Code: http.StatusConflict, Message: err.Error()}
	}
	return &Error{Code: http.StatusInternalServerError, Message: err.Error()}
}
