package jsonscan

import (
	"encoding/json"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"
)

// documents are JSON texts, valid and not, for the checks of Skip.
var documents = []string{
	`null`, `true`, `false`, `0`, `-0`, `1`, `-1`, `12.5`, `1e3`, `1E+3`, `1e-3`, `-0.0e0`, `123456789012345678901234567890`,
	`""`, `"a"`, `"\u00e9\ud83d\ude00\ud800\/\b\f\n\r\t\"\\"`, "\"\xff\xfe\"", "\"caf\u00e9\"", `[]`, `{}`, `[1,"a",null,true,{}]`,
	`{"a":{"b":[{"c":[]}]},"d":1}`, " \t\r\n{ \"a\" : [ 1 , 2 ] }\n ", strings.Repeat("[", 900) + strings.Repeat("]", 900),
	// broken
	``, ` `, `nul`, `nulll`, `tru`, `truex`, `fals`, `01`, `-`, `-a`, `1.`, `.5`, `1e`, `1e+`, `+1`, `0x10`, `NaN`, `Infinity`,
	`"`, `"abc`, `"\x"`, `"\u12"`, `"\u12g4"`, "\"a\x01b\"", "\"a\x1fb\"", "\"\x7f\"", `[`, `]`, `[1`, `[1,]`, `[,1]`, `[1 2]`,
	`{`, `}`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{,"a":1}`, `{"a" 1}`, `{a:1}`, `{'a':1}`, `{1:1}`, `{"a":1 "b":2}`, `[}`, `{]`,
	`[{]}`, `{"a":[}]`, `1 2`, `[] []`, `{}x`, "\xef\xbb\xbf{}", "{}\x00", strings.Repeat("[", 300),
}

// TestSkipMatchesValid: Skip takes a document exactly when encoding/json
// deems it valid, as long as it is not deeper than MaxDepth.
func TestSkipMatchesValid(t *testing.T) {
	for _, doc := range documents {
		checkSkip(t, []byte(doc))
	}
}

func FuzzSkip(f *testing.F) {
	for _, doc := range documents {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) { checkSkip(t, doc) })
}

func checkSkip(t *testing.T, doc []byte) {
	t.Helper()
	s := New(doc)
	s.Skip()
	got, want := s.End(), json.Valid(doc)
	if got && !want {
		t.Errorf("Skip took %q, which is not valid JSON", doc)
	}
	if !got && want && depth(doc) <= MaxDepth {
		t.Errorf("Skip refused %q, valid JSON of depth %d", doc, depth(doc))
	}
	if raw := New(doc).Raw(); got && strings.TrimSpace(string(raw)) != string(raw) {
		t.Errorf("Raw(%q) = %q, with white space", doc, raw)
	}
}

// depth is the deepest nesting of arrays and objects in doc.
func depth(doc []byte) int {
	d, deepest, inString := 0, 0, false
	for i := 0; i < len(doc); i++ {
		switch c := doc[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			d++
			deepest = max(deepest, d)
		case c == ']' || c == '}':
			d--
		}
	}
	return deepest
}

func TestDepthBounds(t *testing.T) {
	nested := func(n int) []byte { return []byte(strings.Repeat("[", n) + strings.Repeat("]", n)) }
	skips := func(doc []byte) bool {
		s := New(doc)
		s.Skip()
		return s.End()
	}
	if !skips(nested(MaxDepth)) {
		t.Errorf("refused %d levels", MaxDepth)
	}
	if skips(nested(MaxDepth + 1)) {
		t.Errorf("took %d levels", MaxDepth+1)
	}
	// Levels opened with Object and Array count.
	s := New([]byte(`{"a":` + string(nested(MaxDepth)) + `}`))
	o, _ := s.Object()
	for o.Next() {
		s.Skip()
	}
	if s.End() {
		t.Errorf("took %d levels under an object", MaxDepth)
	}
}

// strings are string literals for the checks of String.
var stringLiterals = []string{
	`""`, `"plain"`, `"with \"quotes\" and \\"`, `"\u00e9\u00E9"`, `"\ud83d\ude00"`, `"\ud800"`, `"\udc00\ud800x"`, `"\u0000"`,
	`"\/\b\f\n\r\t"`, "\"caf\u00e9 \u2028\"", "\"\xff\"", "\"a\xc3\"", "\"\xed\xa0\x80\"", "\"\xef\xbf\xbd\"", "\"\xf4\x90\x80\x80\"",
	`"` + strings.Repeat("long ", 1000) + `"`, `"` + strings.Repeat("x", chunkSize) + `"`,
	`null`, `1`, `true`, `[]`, `{}`, `"unterminated`, "\"\x01\"", `"\q"`,
}

// TestStringMatchesUnmarshal: String decodes a value exactly as
// json.Unmarshal decodes it into a string, and gives up where it fails.
func TestStringMatchesUnmarshal(t *testing.T) {
	for _, lit := range stringLiterals {
		checkString(t, []byte(lit))
	}
}

func FuzzString(f *testing.F) {
	for _, lit := range stringLiterals {
		f.Add([]byte(lit))
	}
	f.Fuzz(func(t *testing.T, lit []byte) { checkString(t, lit) })
}

func checkString(t *testing.T, lit []byte) {
	t.Helper()
	got, want := "unset", "unset"
	s := New(lit)
	s.String(&got)
	ok := s.End()
	err := json.Unmarshal(lit, &want)
	switch {
	case ok != (err == nil):
		t.Errorf("String(%q): took it %v, json.Unmarshal: %v", lit, ok, err)
	case ok && got != want:
		t.Errorf("String(%q) = %q, json.Unmarshal %q", lit, got, want)
	}
}

// TestStringsShareChunks: short strings cost a few allocations per
// document, long ones their own; none refers to the input.
func TestStringsShareChunks(t *testing.T) {
	doc := []byte(`["` + strings.Repeat(`abcdefgh","`, 999) + `abcdefgh"]`)
	allocs := testing.AllocsPerRun(10, func() {
		s := New(doc)
		a, _ := s.Array()
		var v string
		for a.Next() {
			s.String(&v)
		}
		if !s.End() {
			t.Fatal("refused")
		}
	})
	// 8,000 bytes of strings: two chunks, the Scanner.
	if allocs > 4 {
		t.Errorf("%v allocations for 1,000 strings", allocs)
	}
	long := []byte(`"` + strings.Repeat("y", chunkSize) + `"`)
	var v string
	s := New(long)
	s.String(&v)
	for i := range long {
		long[i] = 'z'
	}
	if v != strings.Repeat("y", chunkSize) {
		t.Error("a long string changed with its input")
	}
}

// TestIntMatchesUnmarshal: Int takes what json.Unmarshal stores in an int,
// with the same value, and gives up on the rest.
func TestIntMatchesUnmarshal(t *testing.T) {
	for _, lit := range []string{`0`, `-0`, `7`, `-7`, `9223372036854775807`, `-9223372036854775808`, `9223372036854775808`,
		`123456789012345678901234567890`, `1.0`, `1e2`, `01`, `-`, `"7"`, `true`, `[]`, `null`} {
		got, want := 42, 42
		s := New([]byte(lit))
		s.Int(&got)
		ok := s.End()
		err := json.Unmarshal([]byte(lit), &want)
		if ok != (err == nil) || ok && got != want {
			t.Errorf("Int(%s) = %d, took it %v; json.Unmarshal %d, %v", lit, got, ok, want, err)
		}
	}
}

func TestBoolMatchesUnmarshal(t *testing.T) {
	for _, lit := range []string{`true`, `false`, `null`, `"true"`, `1`, `tru`, `falsey`, `[]`} {
		for _, start := range []bool{false, true} {
			got, want := start, start
			s := New([]byte(lit))
			s.Bool(&got)
			ok := s.End()
			err := json.Unmarshal([]byte(lit), &want)
			if ok != (err == nil) || ok && got != want {
				t.Errorf("Bool(%s) from %v = %v, took it %v; json.Unmarshal %v, %v", lit, start, got, ok, want, err)
			}
		}
	}
}

// TestField: exact names match, others are unknown, and a key encoding/json
// would match only case-insensitively, or a field given twice, gives up.
func TestField(t *testing.T) {
	fields := NewFields("type", "last_check_in", "host")
	cases := []struct {
		doc    string
		want   []int
		failed bool
	}{
		{`{"type":1,"host":2,"other":3,"last_check_in":4}`, []int{0, 2, -1, 1}, false},
		{`{"typ":1,"types":2,"":3,"type_":4}`, []int{-1, -1, -1, -1}, false},
		{`{"\u0074ype":1}`, []int{0}, false},
		{`{"type":1,"type":2}`, []int{0, -1}, true},
		{`{"type":1,"\u0074ype":2}`, []int{0, -1}, true},
		{`{"TYPE":1}`, []int{-1}, true},
		{`{"Host":1}`, []int{-1}, true},
		{`{"ho\u017ft":1}`, []int{-1}, true},          // ſ folds to s
		{"{\"ho\u017ft\":1}", []int{-1}, true},        // unescaped
		{`{"last_chec\u212a_in":1}`, []int{-1}, true}, // the Kelvin sign folds to k
		{`{"\u0131d":1,"Other":2,"caf\u00e9":3}`, []int{-1, -1, -1}, false},
	}
	for _, c := range cases {
		s := New([]byte(c.doc))
		o, ok := s.Object()
		if !ok {
			t.Fatalf("%s: not an object", c.doc)
		}
		var got []int
		for o.Next() {
			got = append(got, o.Field(fields))
			s.Skip()
		}
		if s.Failed() != c.failed || len(got) != len(c.want) || !equalInts(got, c.want) {
			t.Errorf("%s: fields %v, gave up %v; want %v, %v", c.doc, got, s.Failed(), c.want, c.failed)
		}
		// encoding/json agrees on which keys set a field.
		var v struct {
			Type        *int `json:"type"`
			LastCheckIn *int `json:"last_check_in"`
			Host        *int `json:"host"`
		}
		if err := json.Unmarshal([]byte(c.doc), &v); err != nil {
			t.Fatal(err)
		}
		matched := (v.Type != nil) || (v.LastCheckIn != nil) || (v.Host != nil)
		exact := false
		for _, i := range got {
			exact = exact || i >= 0
		}
		if matched && !exact && !c.failed {
			t.Errorf("%s: encoding/json sets a field that Field does not find", c.doc)
		}
	}
}

func equalInts(a, b []int) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

func TestNewFieldsRefusesNames(t *testing.T) {
	for _, name := range []string{"Type", "café", "a-b", "a b"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewFields(%q) did not panic", name)
				}
			}()
			NewFields(name)
		}()
	}
}

// TestSpecialBytes checks the eight-byte test against the byte table: for
// every byte value at every position, and on random words.
func TestSpecialBytes(t *testing.T) {
	const plain = 0x6161616161616161 // "aaaaaaaa"
	for pos := 0; pos < 8; pos++ {
		for c := 0; c < 256; c++ {
			x := plain&^(0xff<<(8*pos)) | uint64(c)<<(8*pos)
			if got := specialBytes(x) != 0; got != !plainByte[c] {
				t.Errorf("byte %#x at %d: special %v", c, pos, got)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		x := rng.Uint64()
		switch rng.IntN(3) {
		case 0:
			x &= 0x7f7f7f7f7f7f7f7f // ASCII
		case 1:
			x = 0x6161616161616161 // plain, but for a few bytes
			for range 1 + rng.IntN(3) {
				b := []byte{'"', '\\', 0, 0x1f, 0x20, 0x7f, 0x80, 0xff, 0x21, 0x5b, 0x5d}[rng.IntN(11)]
				pos := 8 * rng.IntN(8)
				x = x&^(0xff<<pos) | uint64(b)<<pos
			}
		}
		want := false
		for i := 0; i < 8; i++ {
			want = want || !plainByte[byte(x>>(8*i))]
		}
		if got := specialBytes(x) != 0; got != want {
			t.Fatalf("%#016x: special %v, want %v", x, got, want)
		}
		first := 8
		for i := 7; i >= 0; i-- {
			if !plainByte[byte(x>>(8*i))] {
				first = i
			}
		}
		if got := bits.TrailingZeros64(specialBytes(x)) >> 3; got != first {
			t.Fatalf("%#016x: first special byte %d, want %d", x, got, first)
		}
	}
}
