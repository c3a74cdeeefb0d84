package loadcheck

import "github.com/tracecar/tracecar/loadcheck/replay"

// env holds what Run needs from the outside world, so that tests can replace it.
type env struct {
	clock  clock
	driver driver
}

// checker runs one load check.
type checker struct {
	cfg      *Config
	env      env
	wl       *workload
	modes    []*mode
	baseline string
	out      *printer
	api      stateAPI
	state    *savedState
	runs     [][]*runResult // by mode index, in round order
	order    [][]string
	notes    []string
	done     int
	total    int
	// replayRuns are the measured runs' counts of a replay.
	replayRuns []*replay.Run
}
