//go:build tracecar_noprotocolerror

package node

// The broken build: `go test -tags tracecar_noprotocolerror ./node/` drops every
// ProtocolError, and TestBadFramesCloseOnlyTheirConnection must fail.
func init() { dropProtocolErrors.Store(true) }
