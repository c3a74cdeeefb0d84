package pipeline

// rewriteKind says what the response to a request needs: nothing (the common path), or the
// addresses of a system table rewritten.
type rewriteKind uint8

const (
	kindNone    rewriteKind = 0
	kindLocal   rewriteKind = 1 // system.local
	kindPeers   rewriteKind = 2 // system.peers
	kindPeersV2 rewriteKind = 3 // system.peers_v2
	kindTable   rewriteKind = 0x0f
	kindOptions rewriteKind = 0x20 // OPTIONS: SUPPORTED loses the bypass keys, see limits.go

	// kindPrepare marks a PREPARE of a statement on the table in the low bits: its
	// response tells the id that later EXECUTEs use.
	kindPrepare rewriteKind = 0x10
)

// kindUse marks a USE statement: its answer sets the connection's keyspace.
const kindUse rewriteKind = 0x40

// kindProbe marks an EXECUTE of a statement id not seen before.
const kindProbe rewriteKind = 0x80
