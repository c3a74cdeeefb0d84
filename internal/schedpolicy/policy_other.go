//go:build !linux

package schedpolicy

// Apply does nothing but report ErrUnsupported: only Linux has these policies.
func Apply(p Policy) (changed int, err error) { return 0, ErrUnsupported }
