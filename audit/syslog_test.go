package audit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tracecar/tracecar/internal/testkit/drivertest"
)

// rsyslog is a real rsyslogd, started by a test with its own configuration: a datagram
// socket (imuxsock), a stream socket (imptcp), UDP and TCP on 127.0.0.1, everything it
// receives written to one file, a line per message with the fields it parsed.
type rsyslog struct {
	bin, dir, conf, out string
	dgram, stream       string
	udp, tcp            string
	cmd                 *exec.Cmd
	exited              chan error
	stderr              *strings.Builder
}

// rsyslogTemplate writes the fields rsyslog parsed from an RFC 5424 message, the input
// it came through, and the MSG, separated by tabs.
const rsyslogTemplate = `%pri%\t%protocol-version%\t%hostname%\t%app-name%\t%procid%\t%msgid%\t%structured-data%\t%timereported:::date-rfc3339%\t%inputname%\t%msg%\n`

func mustRsyslog(t *testing.T) *rsyslog {
	t.Helper()
	bin := drivertest.RequireTool(t, "rsyslogd", "rsyslog")
	dir := t.TempDir()
	r := &rsyslog{
		dir: dir, conf: filepath.Join(dir, "rsyslog.conf"), out: filepath.Join(dir, "received.log"),
		dgram: filepath.Join(dir, "dgram.sock"), stream: filepath.Join(dir, "stream.sock"),
		udp: freeAddr(t, "udp"), tcp: freeAddr(t, "tcp"),
	}
	_, udpPort, _ := net.SplitHostPort(r.udp)
	_, tcpPort, _ := net.SplitHostPort(r.tcp)
	conf := fmt.Sprintf(`global(workDirectory=%q maxMessageSize="64k")
module(load="imuxsock" SysSock.Use="off")
input(type="imuxsock" Socket=%q UseSpecialParser="off" ParseHostname="on" IgnoreTimestamp="off")
module(load="imptcp")
input(type="imptcp" path=%q unlink="on")
module(load="imudp")
input(type="imudp" address="127.0.0.1" port=%q)
module(load="imtcp")
input(type="imtcp" address="127.0.0.1" port=%q)
template(name="fields" type="string" string="%s")
*.* action(type="omfile" file=%q template="fields")
`, dir, r.dgram, r.stream, udpPort, tcpPort, rsyslogTemplate, r.out)
	if err := os.WriteFile(r.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	r.bin = bin
	r.start(t)
	t.Cleanup(func() { r.stop(t) })
	return r
}

func freeAddr(t *testing.T, network string) string {
	t.Helper()
	if network == "udp" {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.LocalAddr().String()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// start runs rsyslogd in the foreground and waits until its inputs listen.
func (r *rsyslog) start(t *testing.T) {
	t.Helper()
	r.cmd = exec.Command(r.bin, "-n", "-f", r.conf, "-i", filepath.Join(r.dir, "rsyslogd.pid"))
	stderr := new(strings.Builder)
	r.stderr = stderr
	r.cmd.Stdout, r.cmd.Stderr = stderr, stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("start rsyslogd: %v", err)
	}
	r.exited = make(chan error, 1)
	go func(c *exec.Cmd, ch chan error) { ch <- c.Wait() }(r.cmd, r.exited)
	deadline := time.Now().Add(15 * time.Second)
	for {
		if r.ready() {
			return
		}
		select {
		case err := <-r.exited:
			r.cmd = nil
			t.Fatalf("rsyslogd exited at start: %v\n%s", err, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("rsyslogd not listening after 15s\n%s", stderr.String())
		}
	}
}

func (r *rsyslog) ready() bool {
	for _, p := range []string{r.dgram, r.stream} {
		if _, err := os.Stat(p); err != nil {
			return false
		}
	}
	c, err := net.DialTimeout("tcp", r.tcp, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// stop ends rsyslogd with SIGTERM and waits for it.
func (r *rsyslog) stop(t *testing.T) {
	t.Helper()
	if r.cmd == nil {
		return
	}
	r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(10 * time.Second):
		r.cmd.Process.Kill()
		<-r.exited
	}
	r.cmd = nil
}

// received is one message as rsyslog parsed it.
type received struct {
	pri, version, hostname, app, procid, msgid, sd, time, input string
	msg                                                         string
}

// waitFor reads rsyslog's file until n messages whose MSG contains marker have arrived.
func (r *rsyslog) waitFor(t *testing.T, marker string, n int) []received {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := r.read(t, marker)
		if len(got) >= n || time.Now().After(deadline) {
			if len(got) != n {
				conf, _ := os.ReadFile(r.conf)
				t.Fatalf("rsyslog received %d messages with %q; want %d\nconfiguration:\n%s\nrsyslogd's output:\n%s",
					len(got), marker, n, conf, r.stderr)
			}
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *rsyslog) read(t *testing.T, marker string) []received {
	t.Helper()
	f, err := os.Open(r.out)
	if os.IsNotExist(err) {
		return nil
	} else if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []received
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), "\t", 10)
		if len(f) != 10 || !strings.Contains(f[9], marker) {
			continue
		}
		got = append(got, received{f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9]})
	}
	return got
}

// auditRecords returns n records whose text needs escaping in every layer: quotes,
// backslashes, brackets, a newline, non-ASCII text and a character beyond U+FFFF.
func auditRecords(marker string, n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{
			EventTime: time.Date(2026, 12, 6, 21, 0, 0, i*1000, time.UTC), Node: "127.0.0.1:9042",
			Source: "10.1.2.3:51000", Username: "élodie", Category: "DML",
			Operation: fmt.Sprintf(`INSERT INTO ks."t]" (k, v) VALUES (?, ?) /* %s-%d \" \\ é 😀 [x="y"] */`+"\n", marker, i),
			Keyspace:  "ks", Table: "t]", Consistency: "LOCAL_QUORUM", BatchID: "b-1",
		}
	}
	recs[n-1].Category, recs[n-1].Error, recs[n-1].ErrorCode = "AUTH", true, 0x100
	return recs
}

// checkArrived checks that each record arrived intact, over input, as an RFC 5424
// message that rsyslog parsed.
func checkArrived(t *testing.T, got []received, want []Record, input string) {
	t.Helper()
	host, _ := os.Hostname()
	for i, g := range got {
		var r Record
		if err := json.Unmarshal([]byte(g.msg), &r); err != nil {
			t.Errorf("message %d: MSG is not the record's JSON: %v\n%s", i, err, g.msg)
			continue
		}
		if !reflect.DeepEqual(r, want[i]) {
			t.Errorf("message %d: got record %+v; want %+v", i, r, want[i])
		}
		pri := "85" // authpriv.notice
		if want[i].Error {
			pri = "84" // authpriv.warning
		}
		if g.pri != pri || g.version != "1" || g.app != "tracecar-audit" || g.msgid != want[i].Category ||
			g.procid != fmt.Sprint(os.Getpid()) || g.sd != "-" || g.hostname != host || g.input != input {
			t.Errorf("message %d: pri %s version %s host %s app %s procid %s msgid %s sd %s input %s; want %s 1 %s tracecar-audit %d %s - %s",
				i, g.pri, g.version, g.hostname, g.app, g.procid, g.msgid, g.sd, g.input, pri, host, os.Getpid(), want[i].Category, input)
		}
		if ts, err := time.Parse(time.RFC3339Nano, g.time); err != nil || !ts.Equal(want[i].EventTime) {
			t.Errorf("message %d: TIMESTAMP read as %s; want %s", i, g.time, want[i].EventTime.Format(time.RFC3339Nano))
		}
	}
}

// transports lists the targets of r, with the rsyslog input each arrives through.
func (r *rsyslog) transports() []struct{ name, target, input string } {
	return []struct{ name, target, input string }{
		{"unixgram", "unixgram://" + r.dgram, "imuxsock"},
		{"unix to a datagram socket", "unix://" + r.dgram, "imuxsock"},
		{"unixstream", "unixstream://" + r.stream, "imptcp"},
		{"unix to a stream socket", "unix://" + r.stream, "imptcp"},
		{"udp", "udp://" + r.udp, "imudp"},
		{"tcp", "tcp://" + r.tcp, "imtcp"},
	}
}

// TestSyslogReachesRsyslog sends records over each transport to a real rsyslogd and
// checks that they arrive intact, as RFC 5424 messages rsyslog parses.
func TestSyslogReachesRsyslog(t *testing.T) {
	r := mustRsyslog(t)
	ctx := context.Background()
	for i, tr := range r.transports() {
		t.Run(tr.name, func(t *testing.T) {
			target, err := ParseSyslogTarget(tr.target)
			if err != nil {
				t.Fatal(err)
			}
			s := NewSyslog(target)
			defer s.Close(ctx)
			marker := fmt.Sprintf("marker%d", i)
			recs := auditRecords(marker, 3)
			if err := s.Write(ctx, recs); err != nil {
				t.Fatalf("Write: %v", err)
			}
			if err := s.Sync(ctx); err != nil {
				t.Fatalf("Sync: %v", err)
			}
			checkArrived(t, r.waitFor(t, marker, len(recs)), recs, tr.input)
		})
	}
}

// TestSyslogDaemonRestart stops the daemon under each transport: a Write then fails, and
// once the daemon is back, the same sink delivers again; a restart between two Writes
// loses nothing.
func TestSyslogDaemonRestart(t *testing.T) {
	r := mustRsyslog(t)
	ctx := context.Background()
	var sinks []*Syslog
	for _, tr := range r.transports() {
		target, err := ParseSyslogTarget(tr.target)
		if err != nil {
			t.Fatal(err)
		}
		s := NewSyslog(target)
		defer s.Close(ctx)
		sinks = append(sinks, s)
		if err := s.Write(ctx, auditRecords("before-"+tr.name, 1)); err != nil {
			t.Fatalf("%s: Write: %v", tr.name, err)
		}
	}
	for _, tr := range r.transports() {
		r.waitFor(t, "before-"+tr.name, 1)
	}
	r.stop(t)
	for i, tr := range r.transports() {
		// UDP learns of the refusal from the ICMP answer to the datagram before, so the
		// error comes on the second Write at the latest.
		var err error
		for try := 0; try < 3 && err == nil; try++ {
			err = sinks[i].Write(ctx, auditRecords("down-"+tr.name, 1))
		}
		if err == nil {
			t.Errorf("%s: three Writes with the daemon stopped all returned nil", tr.name)
		} else if !strings.Contains(err.Error(), "syslog "+tr.target) {
			t.Errorf("%s: error %q does not name the target", tr.name, err)
		}
	}
	r.start(t)
	for i, tr := range r.transports() {
		recs := auditRecords("after-"+tr.name, 2)
		if err := sinks[i].Write(ctx, recs); err != nil {
			t.Errorf("%s: Write after the restart: %v", tr.name, err)
			continue
		}
		checkArrived(t, r.waitFor(t, "after-"+tr.name, len(recs)), recs, tr.input)
	}
	// A restart between two Writes loses nothing and shows no error: the sink finds its
	// connection gone (a stream closed by the daemon, a datagram socket refused) and
	// sends again on a new one.
	r.stop(t)
	r.start(t)
	for i, tr := range r.transports() {
		recs := auditRecords("again-"+tr.name, 2)
		if err := sinks[i].Write(ctx, recs); err != nil {
			t.Errorf("%s: Write after a restart between Writes: %v", tr.name, err)
			continue
		}
		checkArrived(t, r.waitFor(t, "again-"+tr.name, len(recs)), recs, tr.input)
	}
}

func TestParseSyslogTarget(t *testing.T) {
	tests := []struct {
		in   string
		want SyslogTarget
		err  string
	}{
		{in: "unix:///dev/log", want: SyslogTarget{Network: "unix", Addr: "/dev/log", Facility: 10}},
		{in: "unixgram:///run/x.sock", want: SyslogTarget{Network: "unixgram", Addr: "/run/x.sock", Facility: 10}},
		{in: "unixstream:///run/x.sock?facility=local3", want: SyslogTarget{Network: "unixstream", Addr: "/run/x.sock", Facility: 19}},
		{in: "udp://127.0.0.1:514", want: SyslogTarget{Network: "udp", Addr: "127.0.0.1:514", Facility: 10}},
		{in: "tcp://[::1]:601?facility=user", want: SyslogTarget{Network: "tcp", Addr: "[::1]:601", Facility: 1}},
		{in: "/dev/log", err: "not a URL"},
		{in: "unix://dev/log", err: "absolute path"},
		{in: "udp://127.0.0.1", err: "HOST:PORT"},
		{in: "tcp://127.0.0.1:0", err: "port must be"},
		{in: "tcp://h:514/x", err: "HOST:PORT"},
		{in: "http://h:514", err: `unknown scheme "http"`},
		{in: "udp://h:514?facility=nope", err: "facility must be one of"},
		{in: "udp://h:514?fac=user", err: `unknown parameter "fac"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSyslogTarget(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), SyslogForms) {
					t.Fatalf("ParseSyslogTarget(%q) = %v, %v; want an error with %q and the forms allowed", tt.in, got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseSyslogTarget(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			}
			if back, err := ParseSyslogTarget(got.String()); err != nil || back != got {
				t.Errorf("String() = %q reads back as %+v, %v", got.String(), back, err)
			}
		})
	}
}

// readFrame reads one octet-counted message from r, byte by byte, so that r's writer is
// told exactly what was taken.
func readFrame(r io.Reader) (string, error) {
	var n int
	var c [1]byte
	for {
		if _, err := io.ReadFull(r, c[:]); err != nil {
			return "", err
		}
		if c[0] == ' ' {
			break
		}
		n = n*10 + int(c[0]-'0')
	}
	msg := make([]byte, n)
	_, err := io.ReadFull(r, msg)
	return string(msg), err
}

// TestSyslogRetrySendsEachRecordOnce: a stream that breaks after two of four messages,
// with no daemon to connect to again, fails the Write; the Log's retry of the same
// records sends the last two only, once the daemon is back.
func TestSyslogRetrySendsEachRecordOnce(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "stream.sock")
	target, err := ParseSyslogTarget("unixstream://" + path)
	if err != nil {
		t.Fatal(err)
	}
	s := NewSyslog(target)
	defer s.Close(ctx)
	client, server := net.Pipe()
	s.conn = client // a connection that worked
	go func() {
		for range 2 {
			readFrame(server)
		}
		server.Close()
	}()
	recs := auditRecords("once", 4)
	if err := s.Write(ctx, recs); err == nil {
		t.Fatal("Write on a broken stream with no daemon to reconnect to returned nil")
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		var msgs []string
		for {
			m, err := readFrame(c)
			if err != nil || strings.Contains(m, "end-0") {
				got <- msgs
				return
			}
			msgs = append(msgs, m)
		}
	}()
	if err := s.Write(ctx, recs); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	if err := s.Write(ctx, auditRecords("end", 1)); err != nil {
		t.Fatalf("Write: %v", err)
	}
	msgs := <-got
	var ops []string
	for _, m := range msgs {
		var r Record
		json.Unmarshal([]byte(m[strings.Index(m, "{"):]), &r)
		ops = append(ops, r.Operation[strings.Index(r.Operation, "once"):][:6])
	}
	if fmt.Sprint(ops) != "[once-2 once-3]" {
		t.Errorf("after the retry the daemon received %v; want [once-2 once-3], the records not sent before", ops)
	}
}

// BenchmarkSyslogWrite sends batches of 64 records to a unix socket drained by a
// goroutine: a datagram per record, or one write per batch on a stream.
func BenchmarkSyslogWrite(b *testing.B) {
	for _, network := range []string{"unixgram", "unixstream"} {
		b.Run(network, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "sock")
			var closer io.Closer
			if network == "unixgram" {
				pc, err := net.ListenPacket("unixgram", path)
				if err != nil {
					b.Fatal(err)
				}
				closer = pc
				go func() {
					buf := make([]byte, 64<<10)
					for {
						if _, _, err := pc.ReadFrom(buf); err != nil {
							return
						}
					}
				}()
			} else {
				ln, err := net.Listen("unix", path)
				if err != nil {
					b.Fatal(err)
				}
				closer = ln
				go func() {
					c, err := ln.Accept()
					if err == nil {
						io.Copy(io.Discard, c)
					}
				}()
			}
			defer closer.Close()
			target, _ := ParseSyslogTarget(network + "://" + path)
			s := NewSyslog(target)
			defer s.Close(context.Background())
			recs := auditRecords("bench", 64)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := s.Write(context.Background(), recs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
		})
	}
}

// BenchmarkSyslogFormat formats one record as a framed RFC 5424 message.
func BenchmarkSyslogFormat(b *testing.B) {
	target, _ := ParseSyslogTarget("tcp://127.0.0.1:514")
	s := NewSyslog(target)
	recs := auditRecords("bench", 1)
	b.ReportAllocs()
	for range b.N {
		s.buf.Reset()
		s.format(&s.buf, &recs[0])
	}
}

// BenchmarkSyslogFormatEncodingJSON is BenchmarkSyslogFormat's body with encoding/json's
// Encoder, as the sink had it first: the ratio of the two is what AppendJSON saves.
func BenchmarkSyslogFormatEncodingJSON(b *testing.B) {
	recs := auditRecords("bench", 1)
	var buf bytes.Buffer
	b.ReportAllocs()
	for range b.N {
		buf.Reset()
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.Encode(&recs[0])
		var out bytes.Buffer
		writeASCII(&out, buf.Bytes())
		fmt.Fprintf(&buf, "<%d>1 %s %s tracecar-audit %s %s - ", 85, recs[0].EventTime.UTC().Format("2006-01-02T15:04:05.000000Z"), "host", "123", "DML")
	}
}
