// Package drivertest runs the interoperability suites of the DataStax Python and Node.js
// drivers (scripts/) against a CQL address, for the node's and the sidecar's tests.
//
// A missing driver skips the test, unless TRACECAR_REQUIRE_DRIVERS is set, as in CI, where
// it fails. The Node.js driver is found through NODE_PATH (set by .ci/run).
package drivertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Python is the interpreter that has Debian's python3-cassandra.
const Python = "/usr/bin/python3"

func scriptsDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "scripts")
}

func required() bool { return os.Getenv("TRACECAR_REQUIRE_DRIVERS") != "" }

func missing(tb testing.TB, what string) {
	tb.Helper()
	Missing(tb, what)
}

// Missing skips tb, saying that what is not installed, or fails it when
// TRACECAR_REQUIRE_DRIVERS is set (as in CI). Every check of a counterpart a test needs goes
// through it (internal/testkit/ci's TestDriverTestsCheckCounterparts holds the tests to it).
func Missing(tb testing.TB, what string) {
	tb.Helper()
	if required() {
		tb.Fatalf("%s is not installed, and TRACECAR_REQUIRE_DRIVERS is set", what)
	}
	tb.Skipf("%s is not installed (.ci/run installs it)", what)
}

// RequireTool returns the path of the program name, or skips tb (fails it when
// TRACECAR_REQUIRE_DRIVERS is set) unless it is on the PATH; pkg is the Debian package
// that has it, for the message.
func RequireTool(tb testing.TB, name, pkg string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		// Debian's daemons (rsyslogd) live in sbin, which a user's PATH may leave out.
		for _, dir := range []string{"/usr/sbin", "/sbin"} {
			if st, serr := os.Stat(filepath.Join(dir, name)); serr == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
				return filepath.Join(dir, name)
			}
		}
		missing(tb, name+" (Debian package "+pkg+")")
	}
	return p
}

// RequireEnvTool returns the program named by the environment variable env, or skips tb
// (fails it when TRACECAR_REQUIRE_DRIVERS is set) unless it names an existing file; what
// says what the program is and how to get it, for the message.
func RequireEnvTool(tb testing.TB, env, what string) string {
	tb.Helper()
	p := os.Getenv(env)
	if p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	missing(tb, fmt.Sprintf("%s (%s=%q)", what, env, p))
	return ""
}

// RequirePythonModules skips tb (fails it when TRACECAR_REQUIRE_DRIVERS is set) unless
// Python can import each module; pkgs names the Debian packages that have them.
func RequirePythonModules(tb testing.TB, pkgs string, modules ...string) {
	tb.Helper()
	if out, err := exec.Command(Python, "-c", "import "+strings.Join(modules, ", ")).CombinedOutput(); err != nil {
		missing(tb, fmt.Sprintf("the Python modules %s (%s; %s: %s)", strings.Join(modules, ", "), pkgs, Python, lastLine(out)))
	}
}

// RequireNodeModules skips tb (fails it when TRACECAR_REQUIRE_DRIVERS is set) unless node
// can require each npm module through NODE_PATH.
func RequireNodeModules(tb testing.TB, modules ...string) {
	tb.Helper()
	RequireTool(tb, "node", "nodejs")
	script := ""
	for _, m := range modules {
		script += "require('" + m + "');"
	}
	check := exec.Command("node", "-e", script)
	check.Env = os.Environ()
	if out, err := check.CombinedOutput(); err != nil {
		missing(tb, fmt.Sprintf("the npm modules %s (npm install them, and name their node_modules in NODE_PATH, now %q; node: %s)",
			strings.Join(modules, " "), os.Getenv("NODE_PATH"), lastLine(out)))
	}
}

// lastLine is the line of a program's output that names its error (Python's ImportError,
// node's "Error: Cannot find module ..."), or its last non-empty line.
func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		// Python's last line is its error; node's is its version, its error above.
		if strings.Contains(lines[i], "Error") && !strings.HasPrefix(strings.TrimSpace(lines[i]), "at ") {
			return strings.TrimSpace(lines[i])
		}
	}
	return strings.TrimSpace(lines[len(lines)-1])
}

// Options select the target and the variant of a suite run.
type Options struct {
	Host        string
	Port        int
	Compression string // none, lz4 or snappy (Python only)
	User, Pass  string
	Keyspace    string // default: one per suite
	// TLSCA, when set, makes the driver connect over TLS, trusting this CA file and
	// checking the server's certificate against Host. TLSCert and TLSKey add a client
	// certificate (gocql and Python).
	TLSCA, TLSCert, TLSKey string
	// Protocol is the protocol version the Python driver, left to negotiate, must reach;
	// 0 means any of 3, 4 and 5.
	Protocol int
}

func (o Options) env() []string {
	env := append(os.Environ(),
		"CQL_HOST="+o.Host,
		"CQL_PORT="+strconv.Itoa(o.Port),
		"CQL_COMPRESSION="+orDefault(o.Compression, "none"),
	)
	if o.User != "" {
		env = append(env, "CQL_USER="+o.User, "CQL_PASS="+o.Pass)
	}
	if o.Keyspace != "" {
		env = append(env, "CQL_KEYSPACE="+o.Keyspace)
	}
	if o.TLSCA != "" {
		env = append(env, "CQL_TLS_CA="+o.TLSCA, "CQL_TLS_CERT="+o.TLSCert, "CQL_TLS_KEY="+o.TLSKey)
	}
	if o.Protocol != 0 {
		env = append(env, "CQL_PROTOCOL="+strconv.Itoa(o.Protocol))
	}
	return env
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// RequirePython skips tb, or fails it when TRACECAR_REQUIRE_DRIVERS is set, unless the
// Python driver is installed.
func RequirePython(tb testing.TB) {
	tb.Helper()
	RequirePythonModules(tb, "the DataStax Python driver: python3-cassandra, python3-lz4, python3-snappy", "cassandra", "lz4", "snappy")
}

// RunPython runs the Python driver suite and fails tb with its output if it fails.
func RunPython(tb testing.TB, o Options) {
	tb.Helper()
	RequirePython(tb)
	run(tb, o.env(), Python, filepath.Join(scriptsDir(), "python_suite.py"))
}

// RunPythonResultMetadata runs CASSANDRA-10786 with the Python driver (python_result_metadata.py):
// a prepared SELECT * executed again after its table's columns changed, by ALTER TABLE
// (change "alter") or by DROP and CREATE ("recreate"), with the protocol version o.Protocol
// (0: negotiated). At v5 the rows must carry the new column. It fails tb, saying so, when
// the node refuses ALTER TABLE.
func RunPythonResultMetadata(tb testing.TB, o Options, change string) {
	tb.Helper()
	RequirePython(tb)
	env := append(o.env(), "CQL_CHANGE="+change)
	if o.Keyspace == "" {
		env = append(env, "CQL_KEYSPACE=py_meta_"+change)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, Python, filepath.Join(scriptsDir(), "python_result_metadata.py"))
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit) && exit.ExitCode() == 3:
		tb.Fatalf("needs ALTER TABLE in the embedded node, which refused it:\n%s", out)
	case err != nil:
		tb.Fatalf("python_result_metadata.py (%s): %v\n%s", change, err, out)
	}
	tb.Logf("%s", out)
}

// RunPythonResultMetadataCases runs RunPythonResultMetadata for each way of changing the
// columns ("recreate", "alter") at v5 and at v4, as subtests of t, with o for the target.
func RunPythonResultMetadataCases(t *testing.T, o Options) {
	for _, change := range []string{"recreate", "alter"} {
		for _, v := range []int{5, 4} {
			t.Run(change+"/v"+string(rune('0'+v)), func(t *testing.T) {
				o := o
				o.Protocol = v
				RunPythonResultMetadata(t, o, change)
			})
		}
	}
}

// RequireNodeJS skips tb, or fails it when TRACECAR_REQUIRE_DRIVERS is set, unless node and
// the cassandra-driver module (through NODE_PATH) are installed.
func RequireNodeJS(tb testing.TB) {
	tb.Helper()
	RequireNodeModules(tb, "cassandra-driver")
}

// RunNodeJS runs the Node.js driver suite and fails tb with its output if it fails.
func RunNodeJS(tb testing.TB, o Options) {
	tb.Helper()
	RequireNodeJS(tb)
	run(tb, o.env(), "node", filepath.Join(scriptsDir(), "node_suite.js"))
}

// output runs a driver script and returns its standard output; its standard error goes to
// the test log, and a failure fails tb with both.
func output(tb testing.TB, env []string, name string, args ...string) []byte {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("%s %v: %v\n%s\n%s", name, args, err, out, stderr.Bytes())
	}
	if stderr.Len() > 0 {
		tb.Logf("%s", stderr.Bytes())
	}
	return out
}

func run(tb testing.TB, env []string, name string, args ...string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	tb.Logf("%s", out)
}

// ScriptPath returns the path of a script in scripts/, for a test that runs it itself
// (with its own standard input, say).
func ScriptPath(name string) string { return filepath.Join(scriptsDir(), name) }

// RunPythonNowInSeconds checks v5's now_in_seconds on QUERY, EXECUTE and BATCH with the
// Python driver (python_now_in_seconds.py), which must negotiate v5.
func RunPythonNowInSeconds(tb testing.TB, o Options) {
	tb.Helper()
	RequirePython(tb)
	run(tb, o.env(), Python, filepath.Join(scriptsDir(), "python_now_in_seconds.py"))
}

// PythonColumnTypes runs statements with the Python driver (python_column_types.py) in
// keyspace o.Keyspace and returns, for the first row of each that returns rows, a line per
// column: "name|type|value", the type as the driver read it from the result metadata and
// the value's Python repr.
func PythonColumnTypes(tb testing.TB, o Options, stmts ...string) string {
	tb.Helper()
	RequirePython(tb)
	return string(output(tb, o.env(), Python, append([]string{filepath.Join(scriptsDir(), "python_column_types.py")}, stmts...)...))
}
