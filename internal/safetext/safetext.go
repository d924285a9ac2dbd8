// Package safetext escapes, in text that came from outside, the characters
// a terminal or a text renderer acts on instead of showing: the C0 and C1
// controls and DEL (ESC, and CSI U+009B and OSC U+009D, which a terminal
// that honours C1 controls takes as ESC [ and ESC ]), the bidirectional
// controls (the embeddings and overrides U+202A–U+202E, the isolates
// U+2066–U+2069, and the marks U+200E, U+200F and U+061C, which can
// reorder what is shown around them), and the line and paragraph
// separators U+2028 and U+2029. A dead
// letter's topic, key or error text, shown by bin/dlq or logged, can then
// neither drive the reader's terminal nor make a line read otherwise than
// it is.
//
// It imports only the standard library, so that every package of the
// module may use it.
package safetext

import (
	"strconv"
	"unicode"
	"unicode/utf8"
)

// Escapes reports whether Text and JSON escape r.
func Escapes(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029'
}

// Text returns s with every rune Escapes names written as Go writes it in
// a quoted string (\x1b, \n, \u009b, \u202e) and every byte that is not
// UTF-8 as \xNN; the rest, backslashes included, as it is. So s comes back
// unchanged when it holds nothing to escape, and strconv.Quote's output
// always does; and since each escape is longer than what it stands for,
// Text(s) is s exactly when it is as long. It is for a line a person reads, where what is quoted
// already went through strconv.Quote and what is not must still not
// reach the terminal raw.
func Text(s string) string {
	var b []byte // nil until the first rune to escape
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		invalid := r == utf8.RuneError && n == 1
		if !invalid && !Escapes(r) {
			if b != nil {
				b = append(b, s[i:i+n]...)
			}
			i += n
			continue
		}
		if b == nil {
			b = append(make([]byte, 0, len(s)+16), s[:i]...)
		}
		if invalid {
			b = append(b, '\\', 'x', hex[s[i]>>4], hex[s[i]&0xf])
		} else {
			q := strconv.QuoteRune(r) // '\x1b', '\n', '\u009b'
			b = append(b, q[1:len(q)-1]...)
		}
		i += n
	}
	if b == nil {
		return s
	}
	return string(b)
}

// JSON returns the JSON text b with DEL and every rune of U+0080 and above
// that Escapes names written as a \uXXXX escape, and every byte that is
// not UTF-8 as \ufffd (what encoding/json makes of one). In JSON text such
// a rune can stand only inside a string, where the escape means the same
// rune: a JSON reader reads the same values as from b. encoding/json and
// log/slog already escape the C0 controls inside strings; the C0 runes left
// in JSON text are the whitespace between values (a line's trailing
// newline), so JSON leaves them as they are. It returns b itself when there
// is nothing to escape.
func JSON(b []byte) []byte {
	var out []byte // nil until the first rune to escape
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf && b[i] != 0x7f {
			if out != nil {
				out = append(out, b[i])
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		invalid := r == utf8.RuneError && n == 1
		if !invalid && !Escapes(r) {
			if out != nil {
				out = append(out, b[i:i+n]...)
			}
			i += n
			continue
		}
		if out == nil {
			out = append(make([]byte, 0, len(b)+16), b[:i]...)
		}
		if invalid {
			r = utf8.RuneError
		}
		out = append(out, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
		i += n
	}
	if out == nil {
		return b
	}
	return out
}

const hex = "0123456789abcdef"
