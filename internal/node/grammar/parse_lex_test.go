package grammar

import (
	"fmt"
	"strings"
	"testing"
)

// TestLexer: cqltext's tokens as the parser sees them, with their lines and columns.
func TestLexer(t *testing.T) {
	tests := []struct{ in, want string }{
		{"SELECT a\n  FROM \"T\"\"x\" -- c\nWHERE k = :Key", `1:0 Ident SELECT|1:7 Ident a|2:2 Ident FROM|2:7 Quoted T"x|3:0 Ident WHERE|3:6 Ident k|3:8 Punct =|3:10 Named key`},
		{`? :"Key" 'it''s' $$a'b$$`, `1:0 Marker ?|1:2 Named Key|1:9 String it's|1:17 String a'b`},
		{"{'k':1, 'v': -2.5e3}", "1:0 Punct {|1:1 String k|1:4 Punct :|1:5 Int 1|1:6 Punct ,|1:8 String v|1:11 Punct :|1:13 Punct -|1:14 Float 2.5e3|1:19 Punct }"},
		{"0xff 1h 123e4567-e89b-12d3-a456-426614174000 <= != !", "1:0 Hex 0xff|1:5 Duration 1h|1:8 UUID 123e4567-e89b-12d3-a456-426614174000|1:45 Punct <=|1:48 Punct !=|1:51 Bad !"},
		{"'a\nb' c", "1:0 String a\nb|2:3 Ident c"},
		{"a /* x\ny */ b", "1:0 Ident a|2:5 Ident b"},
		{"x 'open", "1:0 Ident x|1:2 Bad 'open"},
		{`:"open`, `1:0 Bad :`},
		{"a @ é", "1:0 Ident a|1:2 Bad @|1:4 Bad é"},
	}
	names := map[tokKind]string{tIdent: "Ident", tQuotedIdent: "Quoted", tString: "String", tInt: "Int", tFloat: "Float",
		tHex: "Hex", tUUID: "UUID", tDuration: "Duration", tMarker: "Marker", tNamedMarker: "Named", tPunct: "Punct", tBad: "Bad"}
	for _, tt := range tests {
		l := lexer{src: tt.in}
		var got []string
		for tok := l.next(); tok.kind != tEOF; tok = l.next() {
			got = append(got, fmt.Sprintf("%d:%d %s %s", tok.line, tok.col, names[tok.kind], tok.text))
			if len(got) > 100 {
				break
			}
		}
		if g := strings.Join(got, "|"); g != tt.want {
			t.Errorf("lexing %q:\ngot  %q\nwant %q", tt.in, g, tt.want)
		}
	}
}
