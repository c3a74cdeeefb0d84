//go:build race

package sidecar

// raceEnabled says that the race detector is on: it changes what the heap holds per
// goroutine and object, so heap bounds do not apply.
const raceEnabled = true
