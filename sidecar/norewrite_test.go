//go:build tracecar_norewrite

package sidecar

// The broken build: `go test -tags tracecar_norewrite ./sidecar/` forwards system table
// responses unchanged, and the no-bypass tests must fail.
func init() { skipRewrite.Store(true) }
