package tracing

import "context"

// WorkMeter counts the CPU time of the work that tracing adds to the requests it records,
// where that work happens: building a recorded session (decoding its request, its
// events), the node-event fetch, and the sinks' writes. Begin returns a mark and End adds
// the CPU time since it; the runtime guardrail attributes the sidecar's CPU to tracing
// from the total. A request that is not recorded (off, fast or full under the threshold)
// never reaches it. Implementations must be safe for concurrent use and not allocate.
type WorkMeter interface {
	Begin() int64
	End(mark int64)
}

// meteredSink is a Sink whose writes a WorkMeter counts.
type meteredSink struct {
	Sink
	w WorkMeter
}

func (m meteredSink) Write(ctx context.Context, s *Session) error {
	mark := m.w.Begin()
	defer m.w.End(mark)
	return m.Sink.Write(ctx, s)
}

// metered wraps s in w when w is set.
func metered(s Sink, w WorkMeter) Sink {
	if w == nil {
		return s
	}
	return meteredSink{s, w}
}

// unmetered returns the sink that s meters, or s.
func unmetered(s Sink) Sink {
	if m, ok := s.(meteredSink); ok {
		return m.Sink
	}
	return s
}
