//go:build tracecar_norewrite

package sidecar

// brokenRewrite: this is the broken build, `go test -tags tracecar_norewrite ./sidecar/`,
// which forwards system table responses unchanged; the no-bypass tests must fail.
const brokenRewrite = true
