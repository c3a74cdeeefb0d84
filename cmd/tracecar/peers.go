package main

import (
	"fmt"
	"os"

	"github.com/tracecar/tracecar/sidecar"
)

// peerMap reads the sidecar's map of peer nodes to sidecars from --cluster-file or
// --peers; with neither it returns nil, and the sidecar follows the convention (a sidecar
// on each node's IP at --peer-port).
func peerMap(file, list string) (*sidecar.PeerMap, error) {
	switch {
	case file != "" && list != "":
		return nil, usageErrorf("--cluster-file and --peers are two ways to give one map: give one")
	case list != "":
		m, err := sidecar.ParsePeerMap(list)
		if err != nil {
			return nil, usageErrorf("--peers: %v", err)
		}
		return m, nil
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--cluster-file: %w", err)
		}
		m, err := sidecar.ParsePeerMap(string(b))
		if err != nil {
			return nil, usageErrorf("--cluster-file %s: %v", file, err)
		}
		return m, nil
	}
	return nil, nil
}
