package tracing

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/tracecar/tracecar/internal/cql"
)

// Sink receives recorded sessions. The Tracer calls Write from one goroutine per sink,
// behind a bounded queue, so a Sink need not be safe for concurrent use and may block;
// while it does, sessions queue up and then are dropped. Write must not modify s.
type Sink interface {
	// Name names the sink in Stats and metrics, such as "otel" or "cql".
	Name() string
	// Write delivers one session.
	Write(ctx context.Context, s *Session) error
	// Close flushes what the sink buffers and releases it.
	Close(ctx context.Context) error
}

// sinkWriteTimeout bounds one Write, so that a hung sink cannot hold its queue forever.
const sinkWriteTimeout = 10 * time.Second

// sinkQueue runs a Sink behind a bounded queue. offer never blocks.
type sinkQueue struct {
	sink    Sink
	name    string
	ch      chan *Session
	stopCh  chan context.Context // carries Close's context to the worker
	exited  chan struct{}
	dropped atomic.Uint64
	errors  atomic.Uint64
	log     zerolog.Logger
}

func newSinkQueue(s Sink, size int, log zerolog.Logger) *sinkQueue {
	q := &sinkQueue{
		sink:   s,
		name:   s.Name(),
		ch:     make(chan *Session, size),
		stopCh: make(chan context.Context, 1),
		exited: make(chan struct{}),
		log:    log,
	}
	go q.run()
	return q
}

func (q *sinkQueue) offer(s *Session) {
	select {
	case q.ch <- s:
	default:
		q.dropped.Add(1)
	}
}

func (q *sinkQueue) run() {
	defer close(q.exited)
	for {
		select {
		case s := <-q.ch:
			q.write(context.Background(), s)
		case ctx := <-q.stopCh:
			for {
				select {
				case s := <-q.ch:
					if ctx.Err() != nil {
						q.dropped.Add(1)
						continue
					}
					q.write(ctx, s)
				default:
					return
				}
			}
		}
	}
}

func (q *sinkQueue) write(ctx context.Context, s *Session) {
	ctx, cancel := context.WithTimeout(ctx, sinkWriteTimeout)
	defer cancel()
	if err := q.sink.Write(ctx, s); err != nil {
		if n := q.errors.Add(1); n&(n-1) == 0 { // log the 1st, 2nd, 4th, 8th… error
			q.log.Warn().Err(err).Str("sink", q.name).Uint64("errors", n).Msg("sink write failed")
		}
	}
}

// stop drains the queue into the sink, then closes the sink.
func (q *sinkQueue) stop(ctx context.Context) error {
	q.stopCh <- ctx
	select {
	case <-q.exited:
	case <-ctx.Done():
		return fmt.Errorf("drain sink %s: %w", q.name, ctx.Err())
	}
	if err := q.sink.Close(ctx); err != nil {
		return fmt.Errorf("close sink %s: %w", q.name, err)
	}
	return nil
}

// LogSink writes one line per session on a zerolog logger, the "slowlog" logger. It is
// the sink named "log"; Options.SlowLog installs one.
type LogSink struct{ log zerolog.Logger }

// NewLogSink returns a LogSink writing to l. Like every Sink it is driven by one
// goroutine; it is safe for concurrent use anyway, as zerolog is.
func NewLogSink(l zerolog.Logger) *LogSink { return &LogSink{log: l} }

// Name returns "log".
func (*LogSink) Name() string { return "log" }

// Write logs s at info level: "slow query" for fast and full sessions, "traced query"
// for sampled and client ones.
func (l *LogSink) Write(_ context.Context, s *Session) error {
	msg := "slow query"
	if nodeTraced(s.Mode) || s.Mode == ModeClient {
		msg = "traced query"
	}
	e := l.log.Info().
		Str("session_id", s.ID).
		Time("started_at", s.StartedAt).
		Int64("duration_us", s.DurationUS).
		Str("mode", s.Mode).
		Str("client", s.Client).
		Str("coordinator", s.Coordinator).
		Str("command", s.Command).
		Str("request", s.Request).
		Dict("parameters", paramDict(s.Parameters)).
		Int("events", len(s.Events))
	if s.Error != "" {
		e = e.Str("error", s.Error)
	}
	if s.TraceID != "" {
		e = e.Str("trace_id", s.TraceID).Str("parent_span_id", s.ParentSpanID)
	}
	e.Msg(msg)
	return nil
}

func paramDict(ps map[string]string) *zerolog.Event {
	keys := make([]string, 0, len(ps))
	for k := range ps {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	d := zerolog.Dict()
	for _, k := range keys {
		d = d.Str(k, ps[k])
	}
	return d
}

// Close does nothing.
func (*LogSink) Close(context.Context) error { return nil }

func itoa(n int) string { return strconv.Itoa(n) }

func formatUUID(u [16]byte) string { return cql.FormatUUID(u) }
