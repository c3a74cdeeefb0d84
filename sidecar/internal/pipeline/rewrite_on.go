//go:build !tracecar_norewrite

package pipeline

// skipRewrite is false: system table responses are rewritten. The broken build
// (rewrite_off.go) sets it, for the no-bypass tests to catch.
const skipRewrite = false
