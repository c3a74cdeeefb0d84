//go:build tracecar_norewrite

package sidecar

// The broken build: `go test -tags tracecar_norewrite ./sidecar/` forwards system table
// responses unchanged, and the no-bypass tests must fail.
import "github.com/tracecar/tracecar/sidecar/pipeline"

func init() { pipeline.SkipRewrite.Store(true) }
