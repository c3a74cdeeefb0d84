package cqlsink

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/internal/node"
)

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestLoginRefused logs in to a node that requires a login: a wrong password and no
// credentials at all are refusals, warned of once and then counted at debug level; the
// right password is ok; a node that cannot be reached is a failure, not a refusal.
func TestLoginRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := node.New(node.Config{Auth: "cassandra:s3cret"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	defer func() { cancel(); <-done }()
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	deadAddr := dead.Addr().String()
	dead.Close()

	for _, tt := range []struct {
		name, addr, user, pass string
		want                   string
	}{
		{"wrong password", ln.Addr().String(), "cassandra", "wrong", LoginRefused},
		{"no credentials", ln.Addr().String(), "", "", LoginRefused},
		{"right password", ln.Addr().String(), "cassandra", "s3cret", LoginOK},
		{"unreachable", deadAddr, "cassandra", "s3cret", LoginFailed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var buf syncBuffer
			log := zerolog.New(&buf).Level(zerolog.DebugLevel)
			c := &Connector{Addr: tt.addr, Username: tt.user, Password: tt.pass, Logger: &log, noWait: true}
			defer c.Close()
			if got := c.Login().State; got != LoginNotTried {
				t.Errorf("state before any attempt = %s; want %s", got, LoginNotTried)
			}
			const attempts = 3
			for range attempts {
				_, _ = c.Session(context.Background())
			}
			l := c.Login()
			if l.State != tt.want {
				t.Fatalf("Login() = %+v; want state %s", l, tt.want)
			}
			wantRefused, wantWarn := uint64(0), 0
			if tt.want == LoginRefused {
				wantRefused, wantWarn = attempts, 1
				if err := l.Err(); err == nil || !strings.Contains(err.Error(), "login to the node") {
					t.Errorf("Err() = %v; want it to name the node login", err)
				}
			} else if err := l.Err(); err != nil {
				t.Errorf("Err() = %v; want nil", err)
			}
			if l.Refused != wantRefused {
				t.Errorf("Refused = %d; want %d", l.Refused, wantRefused)
			}
			out := buf.String()
			if got := strings.Count(out, `"level":"warn"`); got != wantWarn {
				t.Errorf("%d warnings; want %d:\n%s", got, wantWarn, out)
			}
			if wantRefused > 0 && strings.Count(out, `"level":"debug"`) != attempts-1 {
				t.Errorf("later refusals not logged at debug level:\n%s", out)
			}
			if tt.pass != "" && strings.Contains(out, tt.pass) {
				t.Errorf("the log holds the password:\n%s", out)
			}
		})
	}
}
