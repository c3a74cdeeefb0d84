package cql

// ResponsePrefix holds the optional parts that precede a response body: the tracing id
// (FlagTracing), the warnings (FlagWarning, v4) and the custom payload (FlagCustomPayload,
// v4). A ResponsePrefix is safe for concurrent use when not modified.
type ResponsePrefix struct {
	TracingID     [16]byte
	HasTracingID  bool
	Warnings      []string
	CustomPayload map[string][]byte
}

// ParseResponsePrefix reads the prefix parts that flags announce from the start of a
// (decompressed) response body, in the spec's order: tracing id, warnings, custom payload.
// It returns the prefix and the rest of the body, which aliases body.
func ParseResponsePrefix(flags byte, body []byte) (ResponsePrefix, []byte, error) {
	var p ResponsePrefix
	if flags&(FlagTracing|FlagWarning|FlagCustomPayload) == 0 {
		return p, body, nil
	}
	d := Decoder{b: body}
	if flags&FlagTracing != 0 {
		p.TracingID = d.UUID()
		p.HasTracingID = true
	}
	if flags&FlagWarning != 0 {
		p.Warnings = d.StringList()
	}
	if flags&FlagCustomPayload != 0 {
		p.CustomPayload = d.BytesMap()
	}
	if d.err != nil {
		return ResponsePrefix{}, nil, d.err
	}
	return p, d.b, nil
}

// AppendResponsePrefix appends the prefix parts that flags announce, in the spec's order.
// A part whose flag is not set is not written, whatever p holds.
func AppendResponsePrefix(b []byte, flags byte, p ResponsePrefix) []byte {
	if flags&FlagTracing != 0 {
		b = AppendUUID(b, p.TracingID)
	}
	if flags&FlagWarning != 0 {
		b = AppendStringList(b, p.Warnings)
	}
	if flags&FlagCustomPayload != 0 {
		b = AppendBytesMap(b, p.CustomPayload)
	}
	return b
}

// ParseRequestPrefix reads the custom payload that precedes a (decompressed) request body
// when flags has FlagCustomPayload. The tracing flag of a request adds no bytes. It returns
// the payload (nil when absent) and the rest of the body, which aliases body.
func ParseRequestPrefix(flags byte, body []byte) (customPayload map[string][]byte, rest []byte, err error) {
	if flags&FlagCustomPayload == 0 {
		return nil, body, nil
	}
	d := Decoder{b: body}
	customPayload = d.BytesMap()
	if d.err != nil {
		return nil, nil, d.err
	}
	return customPayload, d.b, nil
}

// AppendRequestPrefix appends customPayload when flags has FlagCustomPayload.
func AppendRequestPrefix(b []byte, flags byte, customPayload map[string][]byte) []byte {
	if flags&FlagCustomPayload != 0 {
		b = AppendBytesMap(b, customPayload)
	}
	return b
}
