package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// SyslogForms lists the targets ParseSyslogTarget accepts, for error messages and help.
const SyslogForms = "unix:///PATH, unixgram:///PATH, unixstream:///PATH, udp://HOST:PORT or tcp://HOST:PORT, " +
	"optionally followed by ?facility=NAME"

// The syslog severities used (RFC 5424 section 6.2.1): a record that failed (a refused
// login, a statement the node answered with an error) is a warning, any other a notice,
// the severity ScyllaDB's own syslog audit uses.
const (
	severityWarning = 4
	severityNotice  = 5
)

// facilityAuthpriv is the default facility: records name users and carry statement text,
// and syslog daemons (Debian's rsyslog among them) keep authpriv in a file only root and
// adm can read.
const facilityAuthpriv = 10

var facilities = map[string]int{
	"kern": 0, "user": 1, "mail": 2, "daemon": 3, "auth": 4, "syslog": 5, "lpr": 6, "news": 7,
	"uucp": 8, "cron": 9, "authpriv": 10, "ftp": 11,
	"local0": 16, "local1": 17, "local2": 18, "local3": 19, "local4": 20, "local5": 21, "local6": 22, "local7": 23,
}

// SyslogTarget is where a Syslog sink sends its messages.
type SyslogTarget struct {
	// Network is "unix" (a datagram socket, or a stream one if the socket is of that
	// type, as syslog(3) does), "unixgram", "unixstream", "udp" or "tcp".
	Network string
	// Addr is the socket's path, or HOST:PORT.
	Addr string
	// Facility is the RFC 5424 facility code, authpriv (10) unless set.
	Facility int
}

// String gives the target in the form ParseSyslogTarget reads.
func (t SyslogTarget) String() string {
	s := t.Network + "://" + t.Addr
	if t.Facility != facilityAuthpriv {
		for name, code := range facilities {
			if code == t.Facility {
				s += "?facility=" + name
			}
		}
	}
	return s
}

// ParseSyslogTarget reads a target in one of the SyslogForms: unix:///dev/log,
// udp://127.0.0.1:514, tcp://logs.example:601?facility=local3.
func ParseSyslogTarget(s string) (SyslogTarget, error) {
	bad := func(why string) (SyslogTarget, error) {
		return SyslogTarget{}, fmt.Errorf("syslog target %q: %s; want %s", s, why, SyslogForms)
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		return bad("not a URL")
	}
	t := SyslogTarget{Network: u.Scheme, Facility: facilityAuthpriv}
	switch u.Scheme {
	case "unix", "unixgram", "unixstream":
		if u.Host != "" || !strings.HasPrefix(u.Path, "/") {
			return bad("a unix socket needs an absolute path after the three slashes")
		}
		t.Addr = u.Path
	case "udp", "tcp":
		host, port, err := net.SplitHostPort(u.Host)
		if err != nil || host == "" || u.Path != "" {
			return bad("want HOST:PORT and nothing after it")
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return bad("the port must be a number from 1 to 65535")
		}
		t.Addr = u.Host
	default:
		return bad("unknown scheme " + strconv.Quote(u.Scheme))
	}
	q := u.Query()
	for k := range q {
		if k != "facility" {
			return bad("unknown parameter " + strconv.Quote(k))
		}
	}
	if q.Has("facility") {
		code, ok := facilities[q.Get("facility")]
		if !ok || len(q["facility"]) > 1 {
			return bad("facility must be one of kern, user, mail, daemon, auth, syslog, lpr, news, uucp, cron, authpriv, ftp, local0 to local7")
		}
		t.Facility = code
	}
	return t, nil
}

// Syslog is a Sink sending each record as one RFC 5424 message: APP-NAME
// "tracecar-audit", MSGID the category, no structured data, and as MSG the record's
// JSON (the file sink's line), escaped to ASCII so that the message carries no BOM and
// any receiver reads it as it is.
//
// Over a datagram socket each message is one datagram. Over a stream (tcp, unixstream)
// messages are framed by octet counting (RFC 6587 section 3.4.1), and a Write's batch goes
// out in one write.
//
// A Write whose connection fails tries once more on a new connection, so a daemon
// that restarted loses nothing; if that fails too, Write returns the error, and the next
// Write connects again. Over UDP a refusal is only known from the ICMP answer to an
// earlier datagram, so that datagram is lost, and the error is returned as it is. Over
// TCP the records written just before the daemon went away can be lost without an error:
// syslog has no acknowledgement.
//
// It is safe for concurrent use.
type Syslog struct {
	target   SyslogTarget
	stream   bool
	hostname string
	pid      string

	mu     sync.Mutex
	conn   net.Conn
	buf    bytes.Buffer // the messages of a Write
	ends   []int        // where each ends in buf
	js     []byte       // a record's JSON
	head   []byte       // a message's header
	failed *failedBatch // what the last Write sent, if it failed
}

// NewSyslog returns a Syslog sending to t. It connects on its first Write.
func NewSyslog(t SyslogTarget) *Syslog {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "-"
	}
	return &Syslog{
		target:   t,
		stream:   t.Network == "tcp" || t.Network == "unixstream",
		hostname: string(appendPrintASCII(nil, host, 255)),
		pid:      strconv.Itoa(os.Getpid()),
	}
}

// Name is "syslog".
func (s *Syslog) Name() string { return "syslog" }

// Write sends recs, in order. When it fails, it remembers how many of them were sent
// (handed whole to the kernel), and the Log's retry, a Write of the same records, skips
// those.
func (s *Syslog) Write(ctx context.Context, recs []Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	skip := s.resume(recs)
	sent, err := s.write(ctx, recs[skip:])
	if err != nil {
		s.failed = &failedBatch{n: len(recs), first: recs[0], last: recs[len(recs)-1], sent: skip + sent}
	}
	return err
}

// failedBatch is what a failed Write sent of its records.
type failedBatch struct {
	n           int
	first, last Record
	sent        int
}

// resume returns how many of recs were sent already, when they are the records of the
// Write that failed last.
func (s *Syslog) resume(recs []Record) int {
	f := s.failed
	s.failed = nil
	if f == nil || len(recs) != f.n || recs[0] != f.first || recs[len(recs)-1] != f.last {
		return 0
	}
	return f.sent
}

// write sends recs and returns how many were sent.
func (s *Syslog) write(ctx context.Context, recs []Record) (int, error) {
	if len(recs) == 0 {
		return 0, nil
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if s.conn != nil && s.stream && peerClosed(s.conn) {
		s.drop()
	}
	// Connect first: whether a unix:// target is a stream, which frames the messages,
	// is known once connected.
	fresh := s.conn == nil
	if fresh {
		if err := s.dial(ctx); err != nil {
			return 0, err
		}
	}
	s.buf.Reset()
	s.ends = s.ends[:0]
	for i := range recs {
		s.format(&s.buf, &recs[i])
		s.ends = append(s.ends, s.buf.Len())
	}
	return s.send(ctx, fresh)
}

// Sync has nothing to do: each Write sends all it is given.
func (s *Syslog) Sync(context.Context) error { return nil }

// Close closes the connection.
func (s *Syslog) Close(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drop()
	return nil
}

func (s *Syslog) drop() {
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
}

// writeTimeout bounds a write when the context sets no deadline: a daemon that stops
// reading must show as an error, not as a sink that hangs.
const writeTimeout = 10 * time.Second

// send sends the messages in buf, ending at ends: a datagram each, or all in one write
// on a stream. A connection that had worked and fails is replaced once, and what was not
// sent whole is sent again on the new one. It returns how many messages were sent.
func (s *Syslog) send(ctx context.Context, fresh bool) (int, error) {
	b := s.buf.Bytes()
	sent, off := 0, 0
	retried := false
	for sent < len(s.ends) {
		end := s.ends[sent]
		if s.stream {
			end = len(b)
		}
		n, err := s.writeConn(ctx, b[off:end])
		off += n
		for sent < len(s.ends) && s.ends[sent] <= off {
			sent++
		}
		if err == nil {
			fresh = false
			continue
		}
		s.drop()
		if s.target.Network == "udp" && sent > 0 && errors.Is(err, syscall.ECONNREFUSED) {
			// The refusal answers the datagram before: that one was lost.
			sent--
		}
		// Over UDP a new socket would hide the refusal the old one reported.
		if fresh || retried || s.target.Network == "udp" {
			return sent, fmt.Errorf("syslog %s: %w", s.target, err)
		}
		retried, fresh = true, true
		stream := s.stream
		if err := s.dial(ctx); err != nil {
			return sent, err
		}
		if s.stream != stream {
			// A unix:// socket changed type: the messages are framed for the other one.
			return sent, fmt.Errorf("syslog %s: the socket changed type; reconnected", s.target)
		}
		off = 0
		if sent > 0 {
			off = s.ends[sent-1]
		}
	}
	return sent, nil
}

func (s *Syslog) writeConn(ctx context.Context, b []byte) (int, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(writeTimeout)
	}
	s.conn.SetWriteDeadline(deadline)
	return s.conn.Write(b)
}

func (s *Syslog) dial(ctx context.Context) error {
	var d net.Dialer
	if _, ok := ctx.Deadline(); !ok {
		d.Timeout = writeTimeout
	}
	var c net.Conn
	var err error
	switch s.target.Network {
	case "unix":
		// As syslog(3): a datagram socket, or a stream one if that is what listens.
		c, err = d.DialContext(ctx, "unixgram", s.target.Addr)
		if errors.Is(err, syscall.EPROTOTYPE) {
			c, err = d.DialContext(ctx, "unix", s.target.Addr)
			s.stream = err == nil
		} else if err == nil {
			s.stream = false
		}
	case "unixstream":
		c, err = d.DialContext(ctx, "unix", s.target.Addr)
	default:
		c, err = d.DialContext(ctx, s.target.Network, s.target.Addr)
	}
	if err != nil {
		return fmt.Errorf("syslog %s: %w", s.target, err)
	}
	s.conn = c
	return nil
}

// peerClosed reports whether the daemon has closed a stream connection. A syslog daemon
// never writes to its clients, so anything but "nothing to read yet" means the
// connection is gone, and writing to it would lose the batch without an error.
func peerClosed(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	closed := false
	// A peek that does not wait: a deadline in the past would not do, as Go reports it
	// before reading.
	err = rc.Read(func(fd uintptr) bool {
		var one [1]byte
		n, _, err := syscall.Recvfrom(int(fd), one[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = (n == 0 && err == nil) || (err != nil && err != syscall.EAGAIN)
		return true
	})
	return closed || err != nil
}

// format appends the message for r to buf, framed for a stream.
func (s *Syslog) format(buf *bytes.Buffer, r *Record) {
	s.js = r.AppendJSON(s.js[:0])
	severity := severityNotice
	if r.Error {
		severity = severityWarning
	}
	h := append(s.head[:0], '<')
	h = strconv.AppendInt(h, int64(s.target.Facility*8+severity), 10)
	h = append(h, ">1 "...)
	if r.EventTime.IsZero() {
		h = append(h, '-')
	} else {
		h = r.EventTime.UTC().AppendFormat(h, "2006-01-02T15:04:05.000000Z")
	}
	h = append(h, ' ')
	h = append(h, s.hostname...)
	h = append(h, " tracecar-audit "...)
	h = append(h, s.pid...)
	h = append(h, ' ')
	h = appendPrintASCII(h, r.Category, 32)
	h = append(h, " - "...)
	s.head = h
	if s.stream {
		var n [20]byte
		buf.Write(strconv.AppendInt(n[:0], int64(len(h)+asciiLen(s.js)), 10))
		buf.WriteByte(' ')
	}
	buf.Write(h)
	writeASCII(buf, s.js)
}

// appendPrintASCII appends s as an RFC 5424 header field: printable ASCII without
// spaces, at most max bytes, or the NILVALUE "-" when that leaves nothing.
func appendPrintASCII(b []byte, s string, max int) []byte {
	n := len(b)
	for i := 0; i < len(s) && len(b)-n < max; i++ {
		if c := s[i]; c > 32 && c < 127 {
			b = append(b, c)
		}
	}
	if len(b) == n {
		b = append(b, '-')
	}
	return b
}

// asciiLen is the length of writeASCII's output for js.
func asciiLen(js []byte) int {
	n := len(js)
	for i := 0; i < len(js); {
		if js[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(js[i:])
		i += size
		n -= size
		if r > 0xFFFF {
			n += 12
		} else {
			n += 6
		}
	}
	return n
}

// writeASCII writes the JSON js with every non-ASCII character escaped as \uXXXX (a
// surrogate pair above U+FFFF). Outside its strings JSON is ASCII already, and
// Record.AppendJSON, as encoding/json, has replaced any invalid UTF-8 with U+FFFD.
func writeASCII(buf *bytes.Buffer, js []byte) {
	const hex = "0123456789abcdef"
	esc := func(u rune) {
		buf.Write([]byte{'\\', 'u', hex[u>>12&15], hex[u>>8&15], hex[u>>4&15], hex[u&15]})
	}
	for len(js) > 0 {
		i := 0
		for i < len(js) && js[i] < utf8.RuneSelf {
			i++
		}
		buf.Write(js[:i])
		if js = js[i:]; len(js) == 0 {
			return
		}
		r, size := utf8.DecodeRune(js)
		js = js[size:]
		if r > 0xFFFF {
			hi, lo := utf16.EncodeRune(r)
			esc(hi)
			esc(lo)
		} else {
			esc(r)
		}
	}
}
