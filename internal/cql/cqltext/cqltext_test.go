package cqltext

import (
	"strings"
	"testing"
)

// tokens returns the tokens of q, as Kind:text, through next.
func tokens(q string, next func(i int) Token) []string {
	var out []string
	for i := 0; ; {
		t := next(i)
		if t.Kind == EOF {
			return out
		}
		s := t.Kind.String() + ":" + q[t.Start:t.End]
		if t.Unterminated() {
			s += "(unterminated)"
		}
		out = append(out, s)
		i = t.End
	}
}

func TestNext(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"select", "SELECT a FROM ks.t", []string{"Ident:SELECT", "Space: ", "Ident:a", "Space: ", "Ident:FROM", "Space: ", "Ident:ks", "Punct:.", "Ident:t"}},
		{"quoted name", `"My ""T"""x`, []string{`QuotedIdent:"My ""T"""`, "Ident:x"}},
		{"strings", `'it''s' $$a'b$$`, []string{"String:'it''s'", "Space: ", "String:$$a'b$$"}},
		{"comments", "a -- c 'x'\n// d\r/* e\n */b", []string{"Ident:a", "Space: ", "Comment:-- c 'x'", "Space:\n", "Comment:// d", "Space:\r", "Comment:/* e\n */", "Ident:b"}},
		{"integer float", "42 1.5 2. 1e-3 1.5E+3 1.e5", []string{"Integer:42", "Space: ", "Float:1.5", "Space: ", "Float:2.", "Space: ", "Float:1e-3", "Space: ", "Float:1.5E+3", "Space: ", "Float:1.e5"}},
		{"not an exponent", "1e 1.foo 1e+x", []string{"Duration:1e", "Space: ", "Integer:1", "Punct:.", "Ident:foo", "Space: ", "Duration:1e", "Punct:+", "Ident:x"}},
		{"duration", "1h30m 12abc", []string{"Duration:1h30m", "Space: ", "Duration:12abc"}},
		{"blob", "0xCAFEbabe 0x 0xzz", []string{"Blob:0xCAFEbabe", "Space: ", "Blob:0x", "Space: ", "Blob:0x", "Ident:zz"}},
		{"uuid", "123e4567-e89b-12d3-a456-426614174000 deadbeef-0000-4000-8000-00000000cafe", []string{"UUID:123e4567-e89b-12d3-a456-426614174000", "Space: ", "UUID:deadbeef-0000-4000-8000-00000000cafe"}},
		{"not a uuid", "deadbeef-0000-4000-8000-00000000cafex", []string{"Ident:deadbeef", "Punct:-", "Integer:0000", "Punct:-", "Integer:4000", "Punct:-", "Integer:8000", "Punct:-", "Duration:00000000cafex"}},
		{"minus is punctuation", "a-1 -2", []string{"Ident:a", "Punct:-", "Integer:1", "Space: ", "Punct:-", "Integer:2"}},
		{"two-byte punctuation", "a<=b>=c!=d<e!f", []string{"Ident:a", "Punct:<=", "Ident:b", "Punct:>=", "Ident:c", "Punct:!=", "Ident:d", "Punct:<", "Ident:e", "Punct:!", "Ident:f"}},
		{"markers", "? :name", []string{"Punct:?", "Space: ", "Punct::", "Ident:name"}},
		{"other characters", "é\t\f$x", []string{"Punct:é", "Space:\t", "Punct:\f", "Punct:$", "Ident:x"}},
		{"underscore", "_a1", []string{"Ident:_a1"}},
		{"unterminated string", "'abc''", []string{"String:'abc''(unterminated)"}},
		{"unterminated name", `"ab`, []string{`QuotedIdent:"ab(unterminated)`}},
		{"unterminated dollar", "$$ab$", []string{"String:$$ab$(unterminated)"}},
		{"unterminated comment", "/* a */ /*/", []string{"Comment:/* a */", "Space: ", "Comment:/*/(unterminated)"}},
		{"empty", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tokens(tt.in, func(i int) Token { return Next(tt.in, i) })
			if strings.Join(got, " | ") != strings.Join(tt.want, " | ") {
				t.Errorf("Next over %q:\ngot  %q\nwant %q", tt.in, got, tt.want)
			}
			b := []byte(tt.in)
			if got := tokens(tt.in, func(i int) Token { return Next(b, i) }); strings.Join(got, " | ") != strings.Join(tt.want, " | ") {
				t.Errorf("Next over []byte(%q):\ngot  %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestNextSignificant(t *testing.T) {
	q := " /* c */ SELECT -- x\n\t* FROM\r\n//y"
	got := tokens(q, func(i int) Token { return NextSignificant(q, i) })
	if want := []string{"Ident:SELECT", "Punct:*", "Ident:FROM"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("got %q; want %q", got, want)
	}
	if e := NextSignificant(q, 0); e.Start != len(" /* c */ ") {
		t.Errorf("first significant token at %d; want %d", e.Start, len(" /* c */ "))
	}
	if e := NextSignificant(q, len(q)-4); e.Kind != EOF || e.Start != len(q) || !e.Open() {
		t.Errorf("after the last token: %+v; want an Open EOF at %d", e, len(q))
	}
}

// TestOpen: a token is Open when the end of the text decided it, and only then.
func TestOpen(t *testing.T) {
	tests := []struct {
		in   string
		open bool // of the first token
	}{
		{"abc", true}, {"abc ", false},
		{"(", false}, {"-", true}, {"- ", false}, {"/", true}, {"$", true}, {"<", true}, {"<=", false}, {"<>", false},
		{"'ab'", true}, {"'ab' ", false}, {"'ab", true},
		{"$$ab$$", false}, {"$$ab$", true},
		{"/* c */", false}, {"/* c *", true}, {"-- c", true}, {"-- c\n", false},
		{"1", true}, {"1 ", false}, {"1.", true}, {"1.5e", true}, {"1.5e-", true}, {"1.5e- ", false}, {"1.5e-3 ", false},
		{"deadbeef", true}, {"deadbeef ", false}, {"deadbeef-00", true}, {"deadbeef-0g", false},
		{"deadbeef-0000-4000-8000-00000000cafe", true}, {"deadbeef-0000-4000-8000-00000000cafe ", false},
		{"é", true}, {"\xc3", true},
	}
	for _, tt := range tests {
		if tok := Next(tt.in, 0); tok.Open() != tt.open {
			t.Errorf("Next(%q, 0) = %+v; want Open %v", tt.in, tok, tt.open)
		}
	}
}

func TestScannerSigns(t *testing.T) {
	tests := []struct{ in, want string }{
		{"c > -1.5e-3", "Ident:c Space:  Punct:> Space:  Float:-1.5e-3"},
		{"-1", "Integer:-1"},
		{"(-1, -2h)", "Punct:( Integer:-1 Punct:, Space:  Duration:-2h Punct:)"},
		{"a-1", "Ident:a Punct:- Integer:1"},
		{"f(x) -1", "Ident:f Punct:( Ident:x Punct:) Space:  Punct:- Integer:1"},
		{"? -1", "Punct:? Space:  Punct:- Integer:1"},
		{"'a' - 1", "String:'a' Space:  Punct:- Space:  Integer:1"},
		{"= -Infinity", "Punct:= Space:  Punct:- Ident:Infinity"},
		{"= - 1", "Punct:= Space:  Punct:- Space:  Integer:1"},
		{"= -0x01", "Punct:= Space:  Punct:- Blob:0x01"},
		{"/* c */ -1 --2", "Comment:/* c */ Space:  Integer:-1 Space:  Comment:--2"},
	}
	for _, tt := range tests {
		s := NewScanner(tt.in)
		var got []string
		for tok := s.Next(); tok.Kind != EOF; tok = s.Next() {
			got = append(got, tok.Kind.String()+":"+tt.in[tok.Start:tok.End])
		}
		if strings.Join(got, " ") != tt.want {
			t.Errorf("Scanner over %q:\ngot  %s\nwant %s", tt.in, strings.Join(got, " "), tt.want)
		}
	}
}

func TestNames(t *testing.T) {
	tests := []struct {
		in, name string
		is       []string // names NameIs accepts
		isNot    []string
	}{
		{"Users", "users", []string{"users"}, []string{"Users", "USERS"}},
		{"users", "users", []string{"users"}, []string{"user", "usersx"}},
		{`"Users"`, "Users", []string{"Users"}, []string{"users"}},
		{`"a""b"`, `a"b`, []string{`a"b`}, []string{`a""b`, "ab", `a"`}},
		{`"local`, "local", nil, []string{"local"}},
		{`""`, "", []string{""}, []string{"x"}},
		{"'users'", "", nil, []string{"users"}},
		{"42", "", nil, []string{"42"}},
	}
	for _, tt := range tests {
		tok := Next(tt.in, 0)
		if got := Name(tt.in, tok); got != tt.name {
			t.Errorf("Name(%q) = %q; want %q", tt.in, got, tt.name)
		}
		if got := Name([]byte(tt.in), tok); got != tt.name {
			t.Errorf("Name([]byte(%q)) = %q; want %q", tt.in, got, tt.name)
		}
		for _, n := range tt.is {
			if !NameIs(tt.in, tok, n) || !NameIs([]byte(tt.in), tok, n) {
				t.Errorf("NameIs(%q, %q) = false; want true", tt.in, n)
			}
		}
		for _, n := range tt.isNot {
			if NameIs(tt.in, tok, n) {
				t.Errorf("NameIs(%q, %q) = true; want false", tt.in, n)
			}
		}
	}
}

func TestKeywordsAndConstants(t *testing.T) {
	q := `select "select" 'x' 1 -1 1h 0x01 123e4567-e89b-12d3-a456-426614174000 TRUE false NaN Infinity nanx ?`
	want := map[string]bool{"'x'": true, "1": true, "1h": true, "0x01": true, "123e4567-e89b-12d3-a456-426614174000": true,
		"TRUE": true, "false": true, "NaN": true, "Infinity": true}
	for i := 0; ; {
		tok := NextSignificant(q, i)
		if tok.Kind == EOF {
			break
		}
		i = tok.End
		w := q[tok.Start:tok.End]
		if got := Constant(q, tok); got != want[w] {
			t.Errorf("Constant(%q) = %v; want %v", w, got, want[w])
		}
		if got := IsKeyword(q, tok, "SELECT"); got != (w == "select") {
			t.Errorf("IsKeyword(%q, SELECT) = %v", w, got)
		}
	}
}

func TestStringValue(t *testing.T) {
	tests := []struct{ in, want string }{
		{"'it''s'", "it's"}, {"'plain'", "plain"}, {"''", ""}, {"$$it's$$", "it's"}, {"$$$$", ""},
		{"'open", "open"}, {"$$open", "open"}, {"x", ""},
	}
	for _, tt := range tests {
		if got := StringValue(tt.in, Next(tt.in, 0)); got != tt.want {
			t.Errorf("StringValue(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

func TestNoAllocs(t *testing.T) {
	q := []byte(`SELECT "Peer", rpc_address FROM System.peers_v2 /* c */ WHERE k = 'x''y' AND v > -1.5e3`)
	n := testing.AllocsPerRun(100, func() {
		for i := 0; i < len(q); {
			tok := NextSignificant(q, i)
			NameIs(q, tok, "peers_v2")
			IsKeyword(q, tok, "from")
			IsPunct(q, tok, "<=")
			i = tok.End
		}
		s := NewScanner(q)
		for tok := s.Next(); tok.Kind != EOF; tok = s.Next() {
		}
	})
	if n != 0 {
		t.Errorf("reading allocates %.1f times; want 0", n)
	}
}

// FuzzNext: whatever the text, the tokens tile it without a gap or an overlap, each
// non-empty; the Scanner's tile it too; and on any prefix, every token before the first
// Open one is the token that the whole text has there.
func FuzzNext(f *testing.F) {
	f.Add("SELECT * FROM system.local WHERE key='local'", 20)
	f.Add(`/* c */ select "a""b", 'it''s', $$x$$ -- y`+"\n from ks.t", 30)
	f.Add("UPDATE t SET v = -1.5e-3, u = 123e4567-e89b-12d3-a456-426614174000 WHERE k = 0xcafe", 50)
	f.Add("a<=b 1h30m 1.e5 é", 6)
	f.Fuzz(func(t *testing.T, q string, cut int) {
		end := 0
		for i := 0; ; {
			tok := Next(q, i)
			if tok.Start != i {
				t.Fatalf("%q: token %+v starts at %d; want %d", q, tok, tok.Start, i)
			}
			if tok.Kind == EOF {
				if i != len(q) || tok.End != len(q) {
					t.Fatalf("%q: EOF %+v at %d", q, tok, i)
				}
				break
			}
			if tok.End <= tok.Start || tok.End > len(q) {
				t.Fatalf("%q: token %+v at %d is empty or too long", q, tok, i)
			}
			if tok.Unterminated() && tok.End != len(q) {
				t.Fatalf("%q: unterminated token %+v ends before the text", q, tok)
			}
			if tok.Unterminated() && !tok.Open() {
				t.Fatalf("%q: unterminated token %+v is not Open", q, tok)
			}
			if tok.Kind == Ident || tok.Kind == QuotedIdent && !tok.Unterminated() {
				if n := Name(q, tok); !NameIs(q, tok, n) {
					t.Fatalf("%q: token %+v names %q but NameIs says no", q, tok, n)
				}
			}
			sig := tok
			for sig.Kind == Space || sig.Kind == Comment {
				sig = Next(q, sig.End)
			}
			if got := NextSignificant(q, i); got != sig {
				t.Fatalf("%q: NextSignificant at %d = %+v; Next has %+v", q, i, got, sig)
			}
			i, end = tok.End, tok.End
		}
		if end != len(q) {
			t.Fatalf("%q: tokens end at %d", q, end)
		}
		s := NewScanner(q)
		prev := 0
		for tok := s.Next(); ; tok = s.Next() {
			if tok.Start != prev {
				t.Fatalf("%q: Scanner token %+v starts at %d; want %d", q, tok, tok.Start, prev)
			}
			if tok.Kind == EOF {
				break
			}
			if tok.End <= tok.Start {
				t.Fatalf("%q: empty Scanner token %+v", q, tok)
			}
			prev = tok.End
		}
		if prev != len(q) {
			t.Fatalf("%q: Scanner tokens end at %d", q, prev)
		}

		// Every prefix of a short text, and one of a long one.
		cuts := []int{min(max(cut, 0), len(q))}
		if len(q) <= 128 {
			cuts = cuts[:0]
			for n := range len(q) + 1 {
				cuts = append(cuts, n)
			}
		}
		for _, n := range cuts {
			checkPrefix(t, q, n)
		}
	})
}

// checkPrefix checks that every token of q[:cut] before the first Open one is the token q
// has there, as Next and NextSignificant read them.
func checkPrefix(t *testing.T, q string, cut int) {
	t.Helper()
	p := q[:cut]
	for _, next := range []func(string, int) Token{Next[string], NextSignificant[string]} {
		for i := 0; ; {
			got := next(p, i)
			if got.Open() {
				if got.Kind == EOF && got.Start != len(p) {
					t.Fatalf("%q cut at %d: EOF %+v", q, cut, got)
				}
				break
			}
			if want := next(q, i); got != want {
				t.Fatalf("%q cut at %d: token %+v, not Open; the whole text has %+v", q, cut, got, want)
			}
			i = got.End
		}
	}
}
