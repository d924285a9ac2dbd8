package safetext_test

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"pgregory.net/rapid"

	"github.com/patchflow/patchflow/internal/safetext"
)

// hostile draws strings made to reach a reader's terminal: C0 and C1
// controls (ESC, CSI U+009B, OSC U+009D, ST U+009C), DEL, the bidi
// controls, the line separators, bytes that are not UTF-8, backslashes and
// quotes, among printable text of every script.
func hostile() *rapid.Generator[string] {
	special := []rune{0x1b, 0x07, 0x08, '\n', '\r', 0x7f, 0x9b, 0x9d, 0x9c, 0x85, 0x80, 0x9f,
		0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069, 0x200e, 0x200f, 0x061c,
		0x2028, 0x2029, '\\', '"', '\'', '[', ']', ';', 0xfffd, 0xfeff, 0x200b, 'é', '界', '🙂'}
	piece := rapid.OneOf(
		rapid.Map(rapid.SampledFrom(special), func(r rune) string { return string(r) }),
		rapid.Map(rapid.RuneFrom(nil, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp), func(r rune) string { return string(r) }),
		rapid.StringN(0, 8, -1),
		rapid.Map(rapid.SliceOfN(rapid.Byte(), 1, 4), func(b []byte) string { return string(b) }), // often not UTF-8
	)
	return rapid.Map(rapid.SliceOfN(piece, 0, 12), func(p []string) string { return strings.Join(p, "") })
}

// escaped returns what of s Escapes names, and whether s is UTF-8.
func escaped(s string) (bad []rune, valid bool) {
	for _, r := range s {
		if safetext.Escapes(r) {
			bad = append(bad, r)
		}
	}
	return bad, utf8.ValidString(s)
}

// The set is exactly the controls (Cc: C0, DEL, C1), the bidi controls and
// the two separators.
func TestEscapes(t *testing.T) {
	want := map[rune]bool{0x061c: true, 0x200e: true, 0x200f: true, 0x2028: true, 0x2029: true, 0x7f: true}
	for r := rune(0); r < 0x20; r++ {
		want[r] = true
	}
	for r := rune(0x80); r < 0xa0; r++ {
		want[r] = true
	}
	for r := rune(0x202a); r <= 0x202e; r++ {
		want[r] = true
	}
	for r := rune(0x2066); r <= 0x2069; r++ {
		want[r] = true
	}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if safetext.Escapes(r) != want[r] {
			t.Errorf("Escapes(%U) = %v", r, !want[r])
		}
	}
}

// For any string, Text leaves no rune to escape and no byte that is not
// UTF-8; a string with neither comes back as it is, and so does anything
// strconv.Quote wrote; a changed one is longer. Only what is escaped
// changes: taking every escape Text wrote back (strconv.Unquote reads them
// as Go wrote them) gives back the string, each byte that is not UTF-8
// included.
func TestTextEscapesEveryControl(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := hostile().Draw(t, "s")
		got := safetext.Text(s)
		if bad, valid := escaped(got); len(bad) > 0 || !valid {
			t.Fatalf("Text(%q) = %q: holds %q, UTF-8 %v", s, got, bad, valid)
		}
		if bad, valid := escaped(s); len(bad) == 0 && valid && got != s {
			t.Fatalf("Text(%q) = %q: changed a safe string", s, got)
		}
		if (len(got) == len(s)) != (got == s) {
			t.Fatalf("Text(%q) = %q: as long, yet changed", s, got)
		}
		if q := strconv.Quote(s); safetext.Text(q) != q {
			t.Fatalf("Text changed strconv.Quote(%q) = %s into %s", s, q, safetext.Text(q))
		}
		// Escape what Text leaves alone (backslashes, quotes) the same way
		// first, and Go reads the result as s.
		pre := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s)
		back, err := strconv.Unquote(`"` + safetext.Text(pre) + `"`)
		if err != nil || back != s {
			t.Fatalf("Text(%q) = %q reads back as %q (%v)", pre, safetext.Text(pre), back, err)
		}
	})
}

// For any JSON text encoding/json writes, JSON leaves no rune to escape
// but the whitespace between values, and a JSON reader reads the same
// values from it; JSON text with nothing to escape comes back as it is.
func TestJSONEscapesEveryControlAndKeepsTheValues(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		key, value := hostile().Draw(t, "key"), hostile().Draw(t, "value")
		in, err := json.Marshal(map[string]any{key: value, "list": []string{value, key}, "nested": map[string]string{value: key}})
		if err != nil {
			t.Fatal(err)
		}
		in = append(in, '\n')
		got := safetext.JSON(in)
		bad, valid := escaped(string(got))
		if !valid || len(bad) != 1 || bad[0] != '\n' || got[len(got)-1] != '\n' {
			t.Fatalf("JSON(%s) = %s: holds %q (want the final newline only), UTF-8 %v", in, got, bad, valid)
		}
		var before, after any
		if err := json.Unmarshal(in, &before); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(got, &after); err != nil {
			t.Fatalf("JSON(%s) = %s: not JSON: %v", in, got, err)
		}
		if !reflect.DeepEqual(before, after) {
			t.Fatalf("JSON(%s) = %s reads as %#v, want %#v", in, got, after, before)
		}
		if bad, _ := escaped(string(in)); len(bad) == 1 && string(got) != string(in) {
			t.Fatalf("JSON changed %s, which holds nothing to escape, into %s", in, got)
		}
	})
}

// Bytes that are not UTF-8 in JSON text (encoding/json never writes them)
// become U+FFFD, as encoding/json reads them.
func TestJSONReplacesBytesThatAreNotUTF8(t *testing.T) {
	in := []byte("{\"a\":\"\x9b31m\xc2\"}")
	got := safetext.JSON(in)
	if string(got) != `{"a":"\ufffd31m\ufffd"}` {
		t.Fatalf("JSON(%q) = %s", in, got)
	}
}
