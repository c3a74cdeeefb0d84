// Package reliability holds tracecar's fault suite: tests that run the sidecar and the
// embedded node in-process, attack them as a hostile client or a failing dependency would,
// and check that memory stays bounded, that other clients keep being served, and that what
// can be lost (only trace records) is counted. The package has no code of its own; its
// tests print the figures quoted in docs/architecture.md, "Reliability and security".
package reliability
