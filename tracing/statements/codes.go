package statements

import (
	"strconv"

	"github.com/tracecar/tracecar/internal/cql"
)

// The indexes of an entry's counts by error code and by consistency level, and their names.

// Error codes, indexed for the per-statement counts.
var errCodes = [...]int32{
	cql.ErrCodeServer, cql.ErrCodeProtocol, cql.ErrCodeBadCredentials, cql.ErrCodeUnavailable,
	cql.ErrCodeOverloaded, cql.ErrCodeBootstrapping, cql.ErrCodeTruncate, cql.ErrCodeWriteTimeout,
	cql.ErrCodeReadTimeout, cql.ErrCodeReadFailure, cql.ErrCodeFunctionFailure, cql.ErrCodeWriteFailure,
	cql.ErrCodeSyntax, cql.ErrCodeUnauthorized, cql.ErrCodeInvalid, cql.ErrCodeConfig,
	cql.ErrCodeAlreadyExists, cql.ErrCodeUnprepared,
}

var errNames = [...]string{
	"server_error", "protocol_error", "bad_credentials", "unavailable",
	"overloaded", "is_bootstrapping", "truncate_error", "write_timeout",
	"read_timeout", "read_failure", "function_failure", "write_failure",
	"syntax_error", "unauthorized", "invalid", "config_error",
	"already_exists", "unprepared", "other",
}

const numErrCodes = len(errCodes) + 1

func errIndex(code int32) int {
	for i, c := range errCodes {
		if c == code {
			return i
		}
	}
	return numErrCodes - 1
}

func errName(i int) string { return errNames[i] }

// Consistency levels are counted by value, 0 (ANY) to 10 (LOCAL_ONE); index 11 is any
// other value or an unreadable request.
const numCLs = 12

func clIndex(c cql.Consistency) int {
	if c <= cql.LocalOne {
		return int(c)
	}
	return numCLs - 1
}

func clName(i int) string {
	if i == numCLs-1 {
		return "other"
	}
	s := cql.Consistency(i).String()
	if s == "" {
		return strconv.Itoa(i)
	}
	return s
}
