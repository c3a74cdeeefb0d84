package sidecar_test

import (
	"bufio"
	"context"
	"fmt"
	"net"

	"github.com/tracecar/tracecar/internal/cql"
	"github.com/tracecar/tracecar/internal/node"
	"github.com/tracecar/tracecar/sidecar"
)

// A sidecar in front of an embedded node: a client's OPTIONS goes through it and the node
// answers SUPPORTED on the same stream.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	nodeLn, _ := net.Listen("tcp", "127.0.0.1:0")
	go node.New(node.Config{}).Serve(ctx, nodeLn)

	p := sidecar.New(sidecar.Config{NodeAddr: nodeLn.Addr().String()}, nil)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	done := make(chan error)
	go func() { done <- p.Serve(ctx, ln) }()

	c, _ := net.Dial("tcp", ln.Addr().String())
	c.Write(cql.AppendHeader(nil, cql.Header{Version: cql.V4, Stream: 7, Opcode: cql.OpOptions}))
	h, _, _, err := cql.ReadFrame(bufio.NewReader(c), nil)
	fmt.Println(h.Opcode, h.Stream, err)
	c.Close()

	cancel()
	fmt.Println(<-done, p.Stats().Requests[cql.OpOptions])
	// Output:
	// SUPPORTED 7 <nil>
	// <nil> 1
}
