package cql

import (
	"bytes"
	"testing"
)

// TestFrameResponse: Frame.Response reads what an ERROR and a RESULT say (code and message;
// kind, rows and paging state, prepared id and result columns) from a plain body, after a
// prefix, and from a compressed one, and agrees with the full decoders; a compressed Rows
// result is read from the start of its body without decompressing it whole, a Prepared
// one whole; and a frame's response is read once however often it is asked for.
func TestFrameResponse(t *testing.T) {
	cols := []ColumnSpec{{Keyspace: "ks", Table: "t", Name: "k", Type: TypeInfo{ID: TypeVarchar}}}
	rows := RowsResult{Metadata: RowsMetadata{Columns: cols, PagingState: []byte("more")},
		Rows: [][][]byte{{[]byte("a")}, {[]byte("b")}, {[]byte("c")}}}
	prepared := PreparedResult{ID: []byte("statement-id"), Metadata: PreparedMetadata{Columns: cols},
		ResultMetadata: RowsMetadata{Columns: append(cols, cols...)}}
	tests := []struct {
		name   string
		msg    Message
		prefix ResponsePrefix
		flags  byte
		check  func(t *testing.T, r *Response)
	}{
		{"error", Error{Code: ErrCodeInvalid, Message: "unconfigured table t"}, ResponsePrefix{}, 0, func(t *testing.T, r *Response) {
			if !r.ErrorRead() || r.ErrCode != ErrCodeInvalid || string(r.ErrMessage) != "unconfigured table t" {
				t.Errorf("error: %+v", r)
			}
		}},
		{"rows after warnings", rows, ResponsePrefix{Warnings: []string{"slow"}}, FlagWarning, func(t *testing.T, r *Response) {
			if r.Kind != ResultRows || r.Rows != 3 || string(r.PagingState) != "more" || r.Err != nil {
				t.Errorf("rows: %+v", r)
			}
		}},
		{"prepared", prepared, ResponsePrefix{}, 0, func(t *testing.T, r *Response) {
			if r.Kind != ResultPrepared || string(r.Prepared.ID) != "statement-id" || r.Prepared.ResultColumns != 2 ||
				string(r.Prepared.Keyspace) != "ks" || r.Rows != -1 {
				t.Errorf("prepared: %+v", r)
			}
		}},
		{"void", VoidResult{}, ResponsePrefix{}, 0, func(t *testing.T, r *Response) {
			if r.Kind != ResultVoid || r.Rows != -1 || r.Err != nil {
				t.Errorf("void: %+v", r)
			}
		}},
	}
	for _, tt := range tests {
		for _, comp := range []Compressor{nil, LZ4{}, Snappy{}} {
			name := tt.name + "/plain"
			if comp != nil {
				name = tt.name + "/" + comp.Name()
			}
			t.Run(name, func(t *testing.T) {
				h := Header{Version: ResponseBit | V4, Stream: 1, Flags: tt.flags}
				frame, err := AppendResponseFrame(nil, h, tt.prefix, tt.msg, comp)
				if err != nil {
					t.Fatal(err)
				}
				reads := 0
				defer CountWork(func(w Work, _ []byte) {
					if w == WorkResponse {
						reads++
					}
				})()
				cc := &countingComp{Compressor: comp}
				var f Frame
				if comp == nil {
					mustView(t, &f, frame, nil)
				} else {
					mustView(t, &f, frame, cc)
				}
				r := f.Response()
				tt.check(t, r)
				if f.Response() != r || reads != 1 {
					t.Errorf("read %d times; want once", reads)
				}
				_, rowsResult := tt.msg.(RowsResult)
				if comp != nil && rowsResult && (cc.n != 0 || !r.Cut && len(frame) > HeaderSize+StartSize) {
					t.Errorf("a compressed page decompressed whole %d times for its row count", cc.n)
				}
			})
		}
	}
}

// TestResponseParse: Response.Parse, for a reader without a frame, reads as Frame.Response
// does, and a message cut before what it says reports it.
func TestResponseParse(t *testing.T) {
	msg := RowsResult{Metadata: RowsMetadata{Columns: []ColumnSpec{{Keyspace: "ks", Table: "t", Name: "k", Type: TypeInfo{ID: TypeInt}}}},
		Rows: [][][]byte{{{0, 0, 0, 1}}}}.AppendBody(nil, V5)
	var r Response
	r.Parse(OpResult, V5, msg)
	if r.Kind != ResultRows || r.Rows != 1 || r.Err != nil {
		t.Errorf("rows: %+v", r)
	}
	r.Parse(OpResult, V5, msg[:10])
	if r.Kind != ResultRows || r.Rows != -1 || r.Err == nil {
		t.Errorf("cut rows: %+v; want the kind, no count and an error", r)
	}
	r.Parse(OpError, V5, Error{Code: ErrCodeSyntax, Message: "line 1"}.AppendBody(nil, V5)[:6])
	if r.ErrorRead() || r.ErrCode != ErrCodeSyntax {
		t.Errorf("cut error: %+v; want its code and not read", r)
	}
	if !bytes.Equal(msg[:4], []byte{0, 0, 0, 2}) {
		t.Fatal("not a Rows result")
	}
}
