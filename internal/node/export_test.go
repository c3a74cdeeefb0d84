package node

// SetDropProtocolErrors switches the broken build of the bad-frame tests on or off, and
// returns the previous setting.
func SetDropProtocolErrors(on bool) bool { return dropProtocolErrors.Swap(on) }
