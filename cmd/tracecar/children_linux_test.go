package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLoadcheckChildrenDieWithIt kills a loadcheck process with SIGKILL, which it cannot
// catch, and checks that the kernel ends its node and sidecar (PR_SET_PDEATHSIG).
func TestLoadcheckChildrenDieWithIt(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "loadcheck", "--modes", "off", "--rounds", "1", "--target-error", "0", "--duration", "1m", "--warmup", "0")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	first, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("no first line: %v", err)
	}
	m := regexp.MustCompile(`pid (\d+).*pid (\d+)`).FindStringSubmatch(first)
	if m == nil {
		t.Fatalf("no pids in the first line:\n%s", first)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	for _, pid := range m[1:3] {
		n, _ := strconv.Atoi(pid)
		deadline := time.Now().Add(30 * time.Second)
		for alive(n) {
			if time.Now().After(deadline) {
				t.Fatalf("child %d still runs 30s after loadcheck was killed", n)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// alive reports whether process pid runs: it exists and is not a zombie waiting for a
// parent that does not reap it.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}
