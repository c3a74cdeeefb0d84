package main

import (
	"net"
	"os"
	"strings"
)

// notifySupervisor sends state to systemd's notification socket when there is one
// (Type=notify): READY=1 once serving; with a takeover, MAINPID too, so that systemd
// follows the new process (NotifyAccess=all).
func notifySupervisor(state string) {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return
	}
	if strings.HasPrefix(path, "@") {
		path = "\x00" + path[1:]
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return
	}
	defer c.Close()
	c.Write([]byte(state))
}
