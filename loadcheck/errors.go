package loadcheck

import (
	"errors"
	"fmt"
)

// The errors Run returns: a usage error (ErrUsage) or a breached guardrail (ErrGuardrail).

// ErrUsage marks errors in the configuration or the command line. The tracecar command
// exits 2 on them.
var ErrUsage = errors.New("usage error")

// ErrGuardrail is returned, wrapped, by Run when a mode's degradation is over its budget
// and significant. The report is returned with it. The tracecar command exits 3 on it.
var ErrGuardrail = errors.New("guardrail breached")

type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func (e *usageError) Unwrap() error { return ErrUsage }

func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}
