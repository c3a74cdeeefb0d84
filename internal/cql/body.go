package cql

// DecodeBody decodes the body of a message with opcode op, as sent with protocol version
// version. The body must already be decompressed and stripped of its prefix (see
// ParseResponsePrefix and ParseRequestPrefix). It returns the message as a value of one of
// this package's types (Startup, Query, RowsResult, Error, …), never a pointer. Slices in the
// result may alias body.
func DecodeBody(op Opcode, version byte, body []byte) (Message, error) {
	switch op {
	case OpError:
		return DecodeError(body)
	case OpStartup:
		return DecodeStartup(body)
	case OpReady:
		return Ready{}, nil
	case OpAuthenticate:
		return DecodeAuthenticate(body)
	case OpOptions:
		return Options{}, nil
	case OpSupported:
		return DecodeSupported(body)
	case OpQuery:
		return DecodeQuery(body, version)
	case OpResult:
		return DecodeResult(body, version)
	case OpPrepare:
		return DecodePrepare(body, version)
	case OpExecute:
		return DecodeExecute(body, version)
	case OpRegister:
		return DecodeRegister(body)
	case OpEvent:
		return DecodeEvent(body)
	case OpBatch:
		return DecodeBatch(body, version)
	case OpAuthChallenge:
		return DecodeAuthChallenge(body)
	case OpAuthResponse:
		return DecodeAuthResponse(body)
	case OpAuthSuccess:
		return DecodeAuthSuccess(body)
	}
	return nil, ErrMalformed
}
