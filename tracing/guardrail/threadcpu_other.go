//go:build !linux

package guardrail

// threadCPUOK says that threadCPU reads no clock here.
const threadCPUOK = false

// threadCPU reports false: no thread CPU clock on this platform.
func threadCPU() (int64, bool) { return 0, false }
