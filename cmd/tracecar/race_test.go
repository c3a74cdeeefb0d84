//go:build race

package main

// raceEnabled says that the race detector is on: it instruments every memory access, the
// sidecar's request path included, so CPU figures compared against each other do not apply.
const raceEnabled = true
