package tracing

import (
	"testing"

	"github.com/tracecar/tracecar/internal/cql"
)

// FuzzConn feeds arbitrary request and response frames through a Conn in every mode: it
// must never panic, and a rewritten response must have a consistent length.
func FuzzConn(f *testing.F) {
	_, req := mustRequest(f, reqHeader(1, 0), executeMsg([]byte("v")), nil)
	_, batch := mustRequest(f, reqHeader(1, 0), cql.Batch{Queries: []cql.BatchQuery{{Query: "x"}}}, cql.LZ4{})
	_, prep := mustRequest(f, reqHeader(1, 0), cql.Prepare{Query: "SELECT 1"}, nil)
	_, resp := mustResponse(f, respHeader(1, cql.FlagTracing), cql.ResponsePrefix{TracingID: nodeID}, rowsMsg(), nil)
	_, presp := mustResponse(f, respHeader(1, 0), cql.ResponsePrefix{}, cql.PreparedResult{ID: testID}, nil)
	_, eresp := mustResponse(f, respHeader(1, 0), cql.ResponsePrefix{}, cql.Error{Code: 1, Message: "x"}, cql.Snappy{})
	for mode := range byte(5) {
		f.Add(mode, req, resp)
		f.Add(mode, batch, eresp)
		f.Add(mode, prep, presp)
		f.Add(mode, req[:12], resp[:20])
	}
	configs := []Config{{}, {Enable: true, Fast: true}, {Enable: true}, {Probability: 1}, {Enable: true, Fast: true, Probability: 1}}
	comps := []cql.Compressor{nil, cql.LZ4{}, cql.Snappy{}}
	f.Fuzz(func(t *testing.T, mode byte, req, resp []byte) {
		if len(req) < cql.HeaderSize || len(resp) < cql.HeaderSize {
			return
		}
		tr := New(Options{NodeEvents: &fakeNode{complete: 1}, RingSize: 4})
		defer mustClose(t, tr)
		c := newCaller(tr, testClient, testCoord)
		defer c.Close()
		mustConfig(t, tr, configs[int(mode)%len(configs)])
		comp := comps[int(mode)/len(configs)%len(comps)]
		h := cql.Header{Version: req[0], Flags: req[1], Stream: int16(req[2])<<8 | int16(req[3]), Opcode: cql.Opcode(req[4])}
		h.Stream &= 0x7f // keep it a request stream
		req[2], req[3] = 0, byte(h.Stream)
		c.OnRequest(h, req, comp)
		c.Sent(h.Stream)
		rh := cql.Header{Version: resp[0], Flags: resp[1], Stream: h.Stream, Opcode: cql.Opcode(resp[4])}
		out := c.OnResponse(rh, resp, comp)
		if len(out) < cql.HeaderSize {
			t.Fatalf("OnResponse returned %d bytes", len(out))
		}
		c.ResponseSent(h.Stream)
		_ = tr.SlowLog(0)
	})
}
