//go:build tracecar_norewrite

package pipeline

// skipRewrite, in the deliberately broken build `go test -tags tracecar_norewrite
// ./sidecar/`, forwards system table responses unchanged: the no-bypass tests must fail
// (TestE2ENoBypassCatchesBrokenRewrite builds and runs it).
const skipRewrite = true
