package tracing_test

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/tracing"
)

// The sidecar hands every request of a connection to its Conn with Begin, keeps the
// Ticket with its own record of the request in flight, and hands it back with the
// response to End. With fast mode and threshold 0, every request is recorded in the ring,
// with its text and consistency.
func Example() {
	tr := tracing.New(tracing.Options{})
	defer tr.Close(context.Background())
	if err := tr.SetConfig(tracing.Config{Enable: true, Fast: true, ThresholdMicros: 0}); err != nil {
		panic(err)
	}
	c := tr.NewConn(netip.MustParseAddrPort("127.0.0.1:50123"), netip.MustParseAddrPort("127.0.0.1:9042"))
	defer c.Close()

	req := cql.AppendFrame(nil, cql.Header{Version: cql.V4, Stream: 1},
		cql.Query{Query: "SELECT * FROM ks.t WHERE k = 1", Params: cql.QueryParams{Consistency: cql.LocalOne}})
	h, _ := cql.ParseHeader(req)
	var rf cql.Frame // the view of a frame, decoded once for every reader; one per direction
	rf.Reset(h, req, nil)
	t := c.Begin(&rf, 0)
	// … the sidecar forwards req (and calls t.Sent when t.Events()); the node answers …
	resp := cql.AppendFrame(nil, cql.Header{Version: cql.V4 | cql.ResponseBit, Stream: 1}, cql.VoidResult{})
	rh, _ := cql.ParseHeader(resp)
	rf.Reset(rh, resp, nil)
	out, t := c.End(t, &rf, 0) // forward out to the client, then:
	c.Done(t, 0)               // a no-op unless t.Events()

	s := tr.SlowLog(1)[0]
	fmt.Println(len(out) == len(resp), s.Mode, s.Command, s.Request)
	fmt.Println(s.Parameters["query"], s.Parameters["consistency_level"])
	// Output:
	// true fast QUERY Execute CQL3 query
	// SELECT * FROM ks.t WHERE k = ? LOCAL_ONE
}
