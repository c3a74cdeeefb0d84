//go:build !tracecar_norewrite

package sidecar

// brokenRewrite is false: the system table rewrite is on (see norewrite_test.go).
const brokenRewrite = false
