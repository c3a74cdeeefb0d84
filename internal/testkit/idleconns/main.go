// Command idleconns measures what an idle CQL connection costs a relay: for each target it
// reads the relay's resident memory (VmRSS in /proc/PID/status), opens n connections to it,
// each with OPTIONS then STARTUP answered by SUPPORTED and READY (raw protocol v4 frames),
// waits while they sit idle, and reads the memory again. The connections stay open until
// every target is measured, so the figures of one run are side by side. bench/idle.sh runs
// it against a sidecar on the event loop, one on the goroutine path and HAProxy.
//
// With -more M it then opens M connections more to the same target, waits again and reads
// the memory a third time: the cost of those is a connection's marginal cost, without what
// a relay pays once whatever the number of connections. A Go process pays such a step in
// its first collections (the collector's own metadata, about 1.5 MB in a sidecar that has
// not collected yet; a process collects at least every two minutes), which the first n
// would otherwise share.
//
// It also gives the CPU each relay takes while its connections sit idle (milliseconds per
// second, from the scheduler's per-thread run time in /proc/PID/task/*/schedstat, over the
// second half of the last wait): what a relay costs a node that is not serving anything.
//
//	idleconns -n 2000 -more 2000 -wait 5s loop=127.0.0.1:29701=PID goroutines=127.0.0.1:29702=PID ...
package main

import (
	"bufio"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	n := flag.Int("n", 2000, "connections per target")
	wait := flag.Duration("wait", 5*time.Second, "idle time before the second reading")
	more := flag.Int("more", 0, "connections opened next, whose cost is reported apart (marginal cost); 0: none")
	hold := flag.Duration("hold", 0, "how long the connections stay open once all are measured (for a heap profile)")
	flag.Parse()
	if flag.NArg() == 0 || *n <= 0 || *more < 0 {
		fmt.Fprintln(os.Stderr, "usage: idleconns [-n N>0] [-more M>=0] [-wait D] [-hold D] name=host:port=pid ...")
		os.Exit(2)
	}
	var held []net.Conn
	if *more > 0 {
		fmt.Printf("%-12s %10s %10s %10s %10s %12s %12s\n", "relay", "before MB", "after MB", "KiB/conn", "then MB", "next KiB/conn", "idle CPU ms/s")
	} else {
		fmt.Printf("%-12s %10s %10s %10s %12s\n", "relay", "before MB", "after MB", "KiB/conn", "idle CPU ms/s")
	}
	for _, arg := range flag.Args() {
		name, addr, pid, err := parseTarget(arg)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		before := mustRSS(pid)
		after, idle := openAndWait(name, addr, pid, *n, *wait, &held)
		fmt.Printf("%-12s %10.1f %10.1f %10.2f", name, float64(before)/1024, float64(after)/1024,
			float64(after-before)/float64(*n))
		if *more == 0 {
			fmt.Printf(" %12.2f\n", idle)
			continue
		}
		then, idle := openAndWait(name, addr, pid, *more, *wait, &held)
		fmt.Printf(" %10.1f %12.2f %12.2f\n", float64(then)/1024, float64(then-after)/float64(*more), idle)
	}
	time.Sleep(*hold)
	for _, c := range held {
		c.Close()
	}
}

func parseTarget(arg string) (name, addr string, pid int, err error) {
	parts := strings.Split(arg, "=")
	if len(parts) != 3 {
		return "", "", 0, fmt.Errorf("target %q: want name=host:port=pid", arg)
	}
	pid, err = strconv.Atoi(parts[2])
	if err != nil {
		return "", "", 0, fmt.Errorf("target %q: pid: %w", arg, err)
	}
	return parts[0], parts[1], pid, nil
}

// openAndWait opens n idle connections to the relay at addr, adds them to held, waits, and
// returns the relay's resident memory then, in KiB, and the CPU it took in the second half
// of the wait, in ms per second. It exits on failure.
func openAndWait(name, addr string, pid, n int, wait time.Duration, held *[]net.Conn) (int64, float64) {
	conns, err := openIdle(addr, n)
	*held = append(*held, conns...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "\n%s: %v\n", name, err)
		os.Exit(1)
	}
	time.Sleep(wait / 2)
	cpu0, t0 := mustCPU(pid), time.Now()
	time.Sleep(wait - wait/2)
	cpu := float64(mustCPU(pid)-cpu0) / 1e6 / time.Since(t0).Seconds()
	return mustRSS(pid), cpu
}

// mustCPU returns the run time of every thread of process pid so far, in ns, or exits.
func mustCPU(pid int) int64 {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var ns int64
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat")
		if err != nil {
			continue // the thread exited since the listing
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			v, _ := strconv.ParseInt(f[0], 10, 64)
			ns += v
		}
	}
	return ns
}

// mustRSS returns rss(pid), or exits.
func mustRSS(pid int) int64 {
	kib, err := rss(pid)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	return kib
}

// rss returns the resident memory of process pid, in KiB.
func rss(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			return strconv.ParseInt(f[1], 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}

// openIdle opens n connections to addr, 50 at a time, each through OPTIONS and STARTUP.
func openIdle(addr string, n int) ([]net.Conn, error) {
	conns := make([]net.Conn, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 50)
	for i := range conns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := handshake(addr)
			if err != nil {
				errs <- err
				return
			}
			conns[i] = c
		}()
	}
	wg.Wait()
	close(errs)
	var kept []net.Conn
	for _, c := range conns {
		if c != nil {
			kept = append(kept, c)
		}
	}
	if err := <-errs; err != nil {
		return kept, fmt.Errorf("%d of %d connections failed, the first: %w", n-len(kept), n, err)
	}
	return kept, nil
}

// handshake connects to addr and does what a driver does before its connection idles:
// OPTIONS (answered by SUPPORTED) and STARTUP (answered by READY), protocol v4.
func handshake(addr string) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(c)
	startup := stringMap(map[string]string{"CQL_VERSION": "3.0.0"})
	for i, step := range []struct {
		op   byte
		body []byte
		want byte
	}{{0x05, nil, 0x06}, {0x01, startup, 0x02}} {
		if _, err := c.Write(frame(int16(i), step.op, step.body)); err != nil {
			c.Close()
			return nil, err
		}
		var h [9]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			c.Close()
			return nil, err
		}
		if _, err := r.Discard(int(binary.BigEndian.Uint32(h[5:9]))); err != nil {
			c.Close()
			return nil, err
		}
		if h[4] != step.want {
			c.Close()
			return nil, fmt.Errorf("opcode 0x%02x answered with 0x%02x, want 0x%02x", step.op, h[4], step.want)
		}
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

// frame returns a v4 request frame.
func frame(stream int16, op byte, body []byte) []byte {
	f := []byte{0x04, 0, 0, 0, op}
	binary.BigEndian.PutUint16(f[2:4], uint16(stream))
	f = binary.BigEndian.AppendUint32(f, uint32(len(body)))
	return append(f[:9], body...)
}

// stringMap encodes a CQL [string map].
func stringMap(m map[string]string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(len(m)))
	for k, v := range m {
		b = binary.BigEndian.AppendUint16(b, uint16(len(k)))
		b = append(b, k...)
		b = binary.BigEndian.AppendUint16(b, uint16(len(v)))
		b = append(b, v...)
	}
	return b
}
