package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"time"

	"github.com/tracecar/tracecar/internal/lifecycle"
)

// childEnv marks a process that loadcheck started, so that a test binary, re-executed as
// a child, runs the command instead of its tests (see TestMain).
const childEnv = "TRACECAR_LOADCHECK_CHILD"

// childStack is the node and the sidecar that loadcheck starts as child processes of its
// own binary when it is given no deployment, so that each process's CPU is its own and
// the client's garbage collector does not stall the sidecar. Both are in one process
// group, which stop kills; on Linux they also die with loadcheck (PR_SET_PDEATHSIG).
type childStack struct {
	node, nodeAPI, sidecar, admin string // addresses; the APIs as URLs
	dir                           string // the run's folder: logs and stdout of both
	procs                         []*exec.Cmd
	waits                         []chan struct{}
	pgid                          int
}

// startChildren starts the node, then the sidecar in front of it, on free loopback ports,
// and prints the first line of the run, which says what runs where.
func startChildren(ctx context.Context, memory *memoryLimit, stdout io.Writer) (*childStack, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this binary to start the node and sidecar: %w", err)
	}
	dir, err := os.MkdirTemp("", "tracecar-loadcheck-")
	if err != nil {
		return nil, err
	}
	st := &childStack{dir: dir}
	fail := func(err error) (*childStack, error) {
		st.stop(true)
		return nil, err
	}
	// The logs go to files, as on a production node, so that the debug mode pays for real
	// writes.
	nodeOut, err := st.start(ctx, exe, "node", []*regexp.Regexp{nodeCQLRE, nodeAPIRE},
		"node", "--listen", "127.0.0.1:0", "--api", "127.0.0.1:0", "--memory-limit", memory.arg(),
		"--log-format", "json", "--log-file", filepath.Join(dir, "node.log"))
	if err != nil {
		return fail(err)
	}
	st.node, st.nodeAPI = nodeOut[0][1], "http://"+nodeOut[1][1]
	scOut, err := st.start(ctx, exe, "sidecar", []*regexp.Regexp{sidecarRE},
		"sidecar", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--node", st.node,
		"--node-api", st.nodeAPI, "--node-kind", "tracecar", // for the node- modes
		"--log-format", "json", "--log-file", filepath.Join(dir, "sidecar.log"),
		"--capture-dir", filepath.Join(dir, "captures"), // for the mode capture
		"--audit-dir", filepath.Join(dir, "audit"), "--audit-enable=false") // for the mode audit
	if err != nil {
		return fail(err)
	}
	st.sidecar, st.admin = scOut[0][1], scOut[0][2]
	fmt.Fprintf(stdout, "tracecar loadcheck: started a node (pid %d, CQL %s, API %s, %s) and a sidecar (pid %d, CQL %s, admin %s) "+
		"as child processes of this binary, in process group %d, which is killed with loadcheck even when it is interrupted; "+
		"their logs go to %s (removed after a run that completes)\n",
		st.procs[0].Process.Pid, st.node, st.nodeAPI, memory.describe(), st.procs[1].Process.Pid, st.sidecar, st.admin, st.pgid, dir)
	return st, nil
}

var (
	nodeCQLRE = regexp.MustCompile(`^tracecar node: CQL on (\S+)`)
	nodeAPIRE = regexp.MustCompile(`^tracecar node: API on http://(\S+)`)
	sidecarRE = regexp.MustCompile(`^tracecar sidecar: CQL on (\S+) -> node \S+, admin API (\S+)`)
)

// childStartTimeout bounds how long a child may take to print its addresses: generous,
// for a loaded machine.
const childStartTimeout = 30 * time.Second

// start runs this binary with args, its output to name.out in the run's folder, and waits
// for a line matching each of want, in order. It returns their submatches.
func (st *childStack) start(ctx context.Context, exe, name string, want []*regexp.Regexp, args ...string) ([][]string, error) {
	out, err := os.Create(filepath.Join(st.dir, name+".out"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stderr = out
	cmd.SysProcAttr = childProcAttr(st.pgid)
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		out.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("start the %s: %w", name, err)
	}
	if st.pgid == 0 {
		st.pgid = cmd.Process.Pid
	}
	st.procs = append(st.procs, cmd)
	exited := make(chan struct{})
	st.waits = append(st.waits, exited)

	found := make(chan []string, len(want))
	go func() {
		defer out.Close()
		sc := bufio.NewScanner(pipe)
		i := 0
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(out, line)
			if i < len(want) {
				if m := want[i].FindStringSubmatch(line); m != nil {
					found <- m
					i++
				}
			}
		}
		cmd.Wait()
		close(exited)
	}()
	var got [][]string
	timer := time.NewTimer(childStartTimeout)
	defer timer.Stop()
	for len(got) < len(want) {
		select {
		case m := <-found:
			got = append(got, m)
		case <-exited:
			return nil, fmt.Errorf("the %s exited before it was ready; its output is in %s", name, out.Name())
		case <-timer.C:
			return nil, fmt.Errorf("the %s did not print its addresses within %v; its output is in %s", name, childStartTimeout, out.Name())
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return got, nil
}

// join adds the children to g, as one actor that returns once they have exited: its
// interrupt ends them (end). A child that exits on its own does not stop the group: the
// load check goes on and reports what it meets, as it did before the group.
func (st *childStack) join(g *lifecycle.Group) {
	quit := make(chan struct{})
	g.Add(func() error {
		<-quit
		st.end()
		return nil
	}, func(error) { close(quit) })
}

// stop ends the children and removes the run's folder unless keep: for a stack that no
// group runs.
func (st *childStack) stop(keep bool) {
	st.end()
	st.remove(keep)
}

// end ends the children: SIGTERM to their process group, so that the sidecar drains, then
// SIGKILL to whatever is left after 10 s.
func (st *childStack) end() {
	if st.pgid == 0 {
		return
	}
	signalGroup(st.pgid, false)
	deadline := time.After(10 * time.Second)
wait:
	for _, w := range st.waits {
		select {
		case <-w:
		case <-deadline:
			break wait
		}
	}
	signalGroup(st.pgid, true)
	for _, w := range st.waits {
		<-w
	}
}

// remove removes the run's folder unless keep.
func (st *childStack) remove(keep bool) {
	if !keep {
		os.RemoveAll(st.dir)
	}
}
