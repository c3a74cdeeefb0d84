package deploytest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/tracecar/tracecar/internal/testkit/drivertest"
)

// TestImage builds the image with deploy/build-image.sh (buildah bud, FROM scratch) from
// the binary built here, and runs it with buildah (chroot isolation, host network): with
// no arguments it prints the usage; as a sidecar in front of a node started outside it,
// it serves gocql, as a user that is not root. The image's size goes to the log (and to
// docs/deploy.md).
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an image")
	}
	buildah := drivertest.RequireTool(t, "buildah", "buildah")
	bin := mustBinary(t)
	image := fmt.Sprintf("localhost/tracecar-test:%d", os.Getpid())
	build := exec.Command(deploy+"/build-image.sh", image)
	build.Env = append(os.Environ(), "TRACECAR_BIN="+bin)
	var stderr bytes.Buffer
	build.Stderr = &stderr
	out, err := build.Output()
	if err != nil {
		t.Fatalf("build-image.sh: %v\n%s\n%s", err, out, stderr.String())
	}
	t.Cleanup(func() { exec.Command(buildah, "rmi", "-f", image).Run() })
	m := regexp.MustCompile(`image \S+ id (\S+) size (.+)`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("build-image.sh printed no id and size:\n%s", out)
	}
	t.Logf("image %s: %s", image, m[2])

	var info struct {
		OCIv1 struct {
			Config struct {
				User       string   `json:"User"`
				Entrypoint []string `json:"Entrypoint"`
				Cmd        []string `json:"Cmd"`
			} `json:"config"`
		} `json:"OCIv1"`
	}
	raw, err := exec.Command(buildah, "inspect", "--type", "image", image).Output()
	if err != nil {
		t.Fatalf("buildah inspect: %v", err)
	}
	if err := json.Unmarshal(raw, &info); err != nil {
		t.Fatalf("buildah inspect: %v\n%s", err, raw)
	}
	cfg := info.OCIv1
	if cfg.Config.User != "65532:65532" || !slicesEqual(cfg.Config.Entrypoint, []string{"/tracecar"}) {
		t.Errorf("user %q entrypoint %q; want 65532:65532 and /tracecar", cfg.Config.User, cfg.Config.Entrypoint)
	}
	if cmd := strings.Join(cfg.Config.Cmd, " "); !strings.HasPrefix(cmd, "sidecar ") || !strings.Contains(cmd, "--node 127.0.0.1:") {
		t.Errorf("the image's command %q; want a sidecar given its --node (no embedded node)", cmd)
	}

	ctr := fmt.Sprintf("tracecar-test-%d", os.Getpid())
	if out, err := exec.Command(buildah, "from", "--name", ctr, image).CombinedOutput(); err != nil {
		t.Fatalf("buildah from: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command(buildah, "rm", ctr).Run() })
	// Nothing but the binary and the CA roots: no shell, no libc.
	mnt, err := exec.Command(buildah, "mount", ctr).Output()
	if err != nil {
		t.Fatalf("buildah mount: %v", err)
	}
	root := strings.TrimSpace(string(mnt))
	var files []string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, strings.TrimPrefix(p, root))
		}
		return nil
	})
	exec.Command(buildah, "umount", ctr).Run()
	if strings.Join(files, " ") != "/etc/ssl/certs/ca-certificates.crt /tracecar" {
		t.Errorf("the image holds %q; want /tracecar and the CA roots only", files)
	}
	usage, err := exec.Command(buildah, "run", "--isolation", "chroot", ctr, "--", "/tracecar").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(usage), "usage: tracecar") {
		t.Errorf("the image without arguments: %v\n%s; want the usage and exit 2", err, usage)
	}

	// The node runs outside, on the host; the image's sidecar reaches it over the host's
	// network.
	nodeProc := startProc(t, bin, "node", "--listen", "127.0.0.1:0", "--api", "", "--log-level", "warn")
	nodeAddr := nodeProc.waitLine(t, regexp.MustCompile(`^tracecar node: CQL on (\S+)$`))[1]
	cqlPort, adminPort := freePort(t, "127.0.0.1"), freePort(t, "127.0.0.1")
	listen := fmt.Sprintf("127.0.0.1:%d", cqlPort)
	sc := startProc(t, buildah, "run", "--isolation", "chroot", "--network", "host", ctr, "--",
		"/tracecar", "sidecar", "--listen", listen, "--node", nodeAddr, "--admin", fmt.Sprintf("127.0.0.1:%d", adminPort))
	sc.waitLine(t, regexp.MustCompile(`CQL on `+regexp.QuoteMeta(listen)+` -> node `))
	pid := pidListening(t, cqlPort)
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGTERM) }) // buildah's child: killing buildah would orphan it
	if uid := procUID(t, pid); uid != "65532" {
		t.Errorf("the sidecar in the image runs as uid %s; want 65532", uid)
	}

	c := gocql.NewCluster("127.0.0.1")
	c.Port = cqlPort
	c.Timeout = 10 * time.Second
	s, err := c.CreateSession()
	if err != nil {
		t.Fatalf("gocql through the image's sidecar: %v\n%s", err, sc.output())
	}
	var rv string
	err = s.Query("SELECT release_version FROM system.local WHERE key = ?", "local").Scan(&rv)
	s.Close()
	if err != nil || rv == "" {
		t.Fatalf("release_version through the image's sidecar: %q, %v", rv, err)
	}
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", adminPort))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("/readyz of the image's sidecar: %s", resp.Status)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := waitExit(sc, 30*time.Second); err != nil {
		t.Errorf("the image's sidecar after SIGTERM: %v", err)
	}
}

func slicesEqual(a, b []string) bool { return strings.Join(a, "\x00") == strings.Join(b, "\x00") }

// pidListening returns the process that listens on 127.0.0.1:port, from /proc.
func pidListening(tb testing.TB, port int) int {
	tb.Helper()
	inode := ""
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		tb.Fatal(err)
	}
	want := fmt.Sprintf("0100007F:%04X", port)
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 9 && f[1] == want && f[3] == "0A" { // 0A: LISTEN
			inode = f[9]
		}
	}
	if inode == "" {
		tb.Fatalf("nothing listens on 127.0.0.1:%d", port)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range procs {
		if l, err := os.Readlink(fd); err == nil && l == "socket:["+inode+"]" {
			pid, _ := strconv.Atoi(strings.Split(fd, "/")[2])
			return pid
		}
	}
	tb.Fatalf("no process holds the socket of 127.0.0.1:%d", port)
	return 0
}

// procUID returns the real uid of pid.
func procUID(tb testing.TB, pid int) string {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^Uid:\s+(\d+)`).FindSubmatch(b)
	if m == nil {
		tb.Fatalf("no Uid in /proc/%d/status", pid)
	}
	return string(m[1])
}

// waitExit waits for p to end with status 0.
func waitExit(p *proc, d time.Duration) error {
	select {
	case <-p.done:
	case <-time.After(d):
		return fmt.Errorf("still running after %v", d)
	}
	for p.cmd.ProcessState == nil {
		time.Sleep(10 * time.Millisecond)
	}
	if !p.cmd.ProcessState.Success() {
		return fmt.Errorf("exit %v", p.cmd.ProcessState)
	}
	return nil
}

// TestExamples checks the pod and the systemd unit against the binary: the pod is YAML
// with the node and tracecar, the probes on /healthz and /readyz, a non-root tracecar;
// the tracecar command lines of both parse (every flag is known and well-formed), and
// systemd-analyze accepts the unit.
func TestExamples(t *testing.T) {
	bin := mustBinary(t)
	drivertest.RequirePythonModules(t, "python3-yaml", "yaml")
	raw, err := exec.Command(drivertest.Python, "-c", "import json, sys, yaml; print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))",
		deploy+"/kubernetes/pod.yaml").Output()
	if err != nil {
		t.Fatalf("kubernetes/pod.yaml is not YAML: %v", err)
	}
	type container struct {
		Name            string   `json:"name"`
		Image           string   `json:"image"`
		Args            []string `json:"args"`
		Env             []struct{ Name string }
		LivenessProbe   *struct{ HTTPGet *struct{ Path string } }
		ReadinessProbe  *struct{ Exec *struct{ Command []string } }
		SecurityContext *struct {
			RunAsNonRoot bool `json:"runAsNonRoot"`
			RunAsUser    int  `json:"runAsUser"`
		} `json:"securityContext"`
	}
	var docs []struct {
		Kind string `json:"kind"`
		Spec struct {
			Containers []container `json:"containers"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &docs); err != nil {
		t.Fatal(err)
	}
	var pod []container
	for _, d := range docs {
		if d.Kind == "Pod" {
			pod = d.Spec.Containers
		}
	}
	if len(pod) != 2 || pod[1].Name != "tracecar" {
		t.Fatalf("the pod's containers %+v; want the node and tracecar", pod)
	}
	tc := pod[1]
	if tc.LivenessProbe == nil || tc.LivenessProbe.HTTPGet == nil || tc.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Error("tracecar's liveness probe is not an httpGet of /healthz")
	}
	if tc.ReadinessProbe == nil || tc.ReadinessProbe.Exec == nil || strings.Join(tc.ReadinessProbe.Exec.Command, " ") != "/tracecar ctl --hosts 127.0.0.1:10000 ready" {
		t.Error("tracecar's readiness probe is not ctl ready (GET /readyz)")
	}
	if sc := tc.SecurityContext; sc == nil || !sc.RunAsNonRoot || sc.RunAsUser != 65532 {
		t.Error("tracecar does not run as the image's non-root user")
	}
	if !strings.Contains(strings.Join(pod[0].Args, " "), "--rpc-address=127.0.0.1") {
		t.Errorf("the node's args %q do not keep it on loopback", pod[0].Args)
	}
	// The probe's command line parses: against a port where nothing listens it is a host
	// that failed (exit 1), not a usage error (exit 2).
	probe := tc.ReadinessProbe.Exec.Command
	probe = append([]string{"ctl", "--hosts", "127.0.0.1:1"}, probe[4:]...)
	if err := exec.Command(bin, probe...).Run(); err == nil || err.(*exec.ExitError).ExitCode() != 1 {
		t.Errorf("the readiness probe against nothing: %v; want exit 1", err)
	}
	podArgs := strings.ReplaceAll(strings.Join(tc.Args, "\x00"), "$(POD_IP)", "127.0.0.1")
	checkParses(t, bin, "pod", strings.Split(podArgs, "\x00"))

	unit, err := os.ReadFile(deploy + "/systemd/tracecar.service")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)ExecStart=/usr/local/bin/tracecar ((?:[^\n]*\\\n)*[^\n]*)`).FindSubmatch(unit)
	if m == nil {
		t.Fatal("no ExecStart=/usr/local/bin/tracecar in the unit")
	}
	args := strings.Fields(strings.ReplaceAll(strings.ReplaceAll(string(m[1]), "\\\n", " "), "${TRACECAR_LISTEN}", "127.0.0.1:9043"))
	checkParses(t, bin, "systemd unit", args)
	// The takeover drop-in: its ExecStart and ExecReload parse, with the unit's flags.
	dropIn, err := os.ReadFile(deploy + "/systemd/tracecar.service.d/takeover.conf")
	if err != nil {
		t.Fatal(err)
	}
	listen := func(s string) string { return strings.ReplaceAll(s, "${TRACECAR_LISTEN}", "127.0.0.1:9043") }
	m = regexp.MustCompile(`(?s)ExecStart=/usr/local/bin/tracecar ((?:[^\n]*\\\n)*[^\n]*)`).FindSubmatch(dropIn)
	if m == nil {
		t.Fatal("no ExecStart=/usr/local/bin/tracecar in the takeover drop-in")
	}
	startArgs := strings.Fields(listen(strings.ReplaceAll(string(m[1]), "\\\n", " ")))
	if got, want := strings.Join(startArgs, " "), strings.Join(args, " ")+" --control-socket=/run/tracecar/ctl.sock"; got != want {
		t.Errorf("the drop-in's ExecStart runs %q; want the unit's with the control socket: %q", got, want)
	}
	checkParses(t, bin, "takeover drop-in ExecStart", startArgs)
	r := regexp.MustCompile(`ExecReload=/bin/sh -c 'exec /usr/local/bin/tracecar ([^'&]*) &'`).FindSubmatch(dropIn)
	if r == nil {
		t.Fatal("no ExecReload running tracecar in the background in the takeover drop-in")
	}
	reloadArgs := strings.Fields(listen(string(r[1])))
	if got, want := strings.Join(reloadArgs, " "), strings.Join(startArgs, " ")+" --takeover"; got != want {
		t.Errorf("the drop-in's ExecReload runs %q; want its ExecStart with --takeover: %q", got, want)
	}
	checkParses(t, bin, "takeover drop-in ExecReload", reloadArgs)
	if sa, err := exec.LookPath("systemd-analyze"); err == nil {
		dir := t.TempDir()
		copy := strings.ReplaceAll(string(unit), "/usr/local/bin/tracecar", bin)
		copy = strings.ReplaceAll(copy, "EnvironmentFile=/etc/tracecar/env", "EnvironmentFile=-/etc/tracecar/env")
		path := filepath.Join(dir, "tracecar.service")
		if err := os.WriteFile(path, []byte(copy), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(sa, "verify", path).CombinedOutput(); err != nil {
			t.Errorf("systemd-analyze verify: %v\n%s", err, out)
		}
	}
}

// checkParses runs the tracecar command line args with --max-connections -1 added: a
// usage error about that flag alone means every other flag parsed and passed its checks.
func checkParses(tb testing.TB, bin, what string, args []string) {
	tb.Helper()
	cmd := exec.Command(bin, append(args, "--max-connections", "-1")...)
	cmd.Env = append(os.Environ(), "TRACECAR_ADMIN_TOKEN=")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "--max-connections must be 0") {
		tb.Errorf("%s: tracecar %s: %v\n%s; want only the --max-connections -1 refused", what, strings.Join(args, " "), err, out)
	}
}
