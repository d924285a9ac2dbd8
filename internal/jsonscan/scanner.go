// Package jsonscan reads JSON documents of a known shape field by field and
// skips the rest without building anything: the listener's hot paths decode
// ~100 KB inventory events of which they use a few kilobytes, and VMaaS
// answers of hundreds of updates.
//
// A Scanner is a fast path in front of encoding/json, never a replacement:
// it accepts only documents encoding/json's Unmarshal accepts, decodes only
// what Unmarshal would store in the same Go types, and gives up on anything
// else. Giving up (Failed) says nothing about why. The caller then decodes
// the same bytes with encoding/json, which has the last word: its answer
// and, for a broken document, its error message. So a Scanner gives up on
// every error (bad syntax, a value of the wrong type, a number that does
// not fit), and also on whatever is valid but unusual enough that copying
// encoding/json's behaviour is not worth the risk: a known field given
// twice in one object (encoding/json merges the values), a key matching a
// field only case-insensitively, nesting deeper than MaxDepth.
//
// What it accepts is checked as strictly as encoding/json checks it: the
// whole document, skipped values included, must be valid JSON (RFC 8259,
// with invalid UTF-8 allowed in strings, as encoding/json allows it).
//
// Strings are copied out of the input into shared chunks of memory, a few
// allocations per document rather than one per string; a string keeps its
// chunk (a few kilobytes) alive. Nothing returned aliases the input.
package jsonscan

import (
	"encoding/json"
	"math/bits"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxDepth bounds the nesting of arrays and objects a Scanner follows;
// deeper, it gives up. encoding/json accepts up to 10,000 levels.
const MaxDepth = 1000

// chunkSize is the size of the memory strings are copied into; a string
// longer than a quarter of it gets its own allocation.
const chunkSize = 8 << 10

// Scanner reads one JSON document. Use it through a pointer, from one
// goroutine; the zero value is not usable, see New.
type Scanner struct {
	data   []byte
	pos    int
	depth  int
	failed bool
	arena  strings.Builder
}

// New returns a Scanner at the start of data. data must not change while
// the Scanner is used; what the Scanner returns does not refer to it.
func New(data []byte) *Scanner { return &Scanner{data: data} }

// Fail makes the Scanner give up: every later call does nothing, and
// Failed reports true.
func (s *Scanner) Fail() { s.failed = true }

// Failed reports whether the Scanner gave up.
func (s *Scanner) Failed() bool { return s.failed }

// End reports whether the document was read whole and well: it checks that
// only white space follows the value read, and is false if the Scanner gave
// up.
func (s *Scanner) End() bool {
	if s.failed {
		return false
	}
	s.skipSpace()
	if s.pos != len(s.data) {
		s.Fail()
	}
	return !s.failed
}

// skipSpace moves past JSON white space.
func (s *Scanner) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// peek returns the first byte of the next token, 0 at the end or after
// giving up.
func (s *Scanner) peek() byte {
	if s.failed {
		return 0
	}
	s.skipSpace()
	if s.pos == len(s.data) {
		return 0
	}
	return s.data[s.pos]
}

// Null consumes a null and reports true if one is next; otherwise it
// consumes nothing.
func (s *Scanner) Null() bool {
	if s.peek() != 'n' {
		return false
	}
	s.literal("null")
	return !s.failed
}

func (s *Scanner) literal(word string) {
	if len(s.data)-s.pos < len(word) || string(s.data[s.pos:s.pos+len(word)]) != word {
		s.Fail()
		return
	}
	s.pos += len(word)
}

// String reads a string into dst. Like encoding/json it leaves dst alone
// for a null; any other value makes the Scanner give up.
func (s *Scanner) String(dst *string) {
	switch s.peek() {
	case '"':
		*dst = s.stringValue()
	case 'n':
		s.literal("null")
	default:
		s.Fail()
	}
}

// stringValue reads the string at the cursor (its opening quote) and
// returns it decoded.
func (s *Scanner) stringValue() string {
	start := s.pos
	raw, plain := s.scanString()
	if s.failed {
		return ""
	}
	if plain {
		return s.copyString(raw)
	}
	return s.unquote(s.data[start:s.pos])
}

// unquote decodes a string literal (quotes included) with escapes or
// invalid UTF-8 exactly as encoding/json does, by asking it: such strings
// are rare.
func (s *Scanner) unquote(literal []byte) string {
	var v string
	if err := json.Unmarshal(literal, &v); err != nil {
		s.Fail()
		return ""
	}
	return v
}

// copyString returns b as a string in the Scanner's shared memory.
func (s *Scanner) copyString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > chunkSize/4 {
		return string(b)
	}
	if s.arena.Cap()-s.arena.Len() < len(b) {
		// A fresh chunk; the strings already returned keep the old one.
		s.arena = strings.Builder{}
		s.arena.Grow(chunkSize)
	}
	start := s.arena.Len()
	s.arena.Write(b)
	return s.arena.String()[start:]
}

// scanString moves past the string literal at the cursor (its opening
// quote) and returns its content between the quotes, and whether that is
// the decoded string as it is: no escapes, valid UTF-8.
func (s *Scanner) scanString() (raw []byte, plain bool) {
	d := s.data
	i := s.pos + 1
	start := i
	plain = true
	ascii := true
	for {
		// Most bytes need no attention; find the next one that does, eight
		// at a time while there are eight.
		for i+8 <= len(d) {
			if m := specialBytes(load64(d[i:])); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i+8 > len(d) {
			for i < len(d) && plainByte[d[i]] {
				i++
			}
		}
		if i >= len(d) {
			s.Fail()
			return nil, false
		}
		switch c := d[i]; {
		case c == '"':
			raw = d[start:i]
			s.pos = i + 1
			if !ascii && plain && !utf8.Valid(raw) {
				plain = false
			}
			return raw, plain
		case c == '\\':
			plain = false
			if i+1 >= len(d) {
				s.Fail()
				return nil, false
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(d) || !isHex(d[i+2]) || !isHex(d[i+3]) || !isHex(d[i+4]) || !isHex(d[i+5]) {
					s.Fail()
					return nil, false
				}
				i += 6
			default:
				s.Fail()
				return nil, false
			}
		case c < 0x20:
			s.Fail()
			return nil, false
		default: // c >= 0x80
			ascii = false
			i++
		}
	}
}

// plainByte marks the bytes a string may hold with no further check:
// printable ASCII other than the quote and the backslash.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func load64(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// specialBytes is non-zero if one of the 8 bytes of x (little-endian) is
// not a plainByte: a quote, a backslash, a control character or a byte of
// 0x80 and above. Its lowest set bit is the high bit of the first such byte
// (bits above it may be set for plain bytes).
func specialBytes(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote := x ^ (ones * '"')
	backslash := x ^ (ones * '\\')
	// A byte b is zero after these xors, or below 0x20, exactly when
	// (b - k) borrows into its high bit while b itself has none; bytes
	// with the high bit set are caught by x itself.
	return ((quote-ones)&^quote | (backslash-ones)&^backslash | (x-ones*0x20)&^x | x) & highs
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// Bool reads true or false into dst; a null leaves dst alone.
func (s *Scanner) Bool(dst *bool) {
	switch s.peek() {
	case 't':
		s.literal("true")
		*dst = !s.failed
	case 'f':
		s.literal("false")
		*dst = false
	case 'n':
		s.literal("null")
	default:
		s.Fail()
	}
}

// Int reads an integer into dst as encoding/json reads one into an int: a
// number without fraction or exponent that fits. A null leaves dst alone.
func (s *Scanner) Int(dst *int) {
	switch c := s.peek(); {
	case c == 'n':
		s.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		start := s.pos
		s.number()
		if s.failed {
			return
		}
		n, err := strconv.ParseInt(string(s.data[start:s.pos]), 10, 0)
		if err != nil {
			s.Fail()
			return
		}
		*dst = int(n)
	default:
		s.Fail()
	}
}

// number moves past the number at the cursor, checking its grammar.
func (s *Scanner) number() {
	d, i := s.data, s.pos
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && '1' <= d[i] && d[i] <= '9':
		i = digits(d, i)
	default:
		s.Fail()
		return
	}
	if i < len(d) && d[i] == '.' {
		if i+1 >= len(d) || d[i+1] < '0' || d[i+1] > '9' {
			s.Fail()
			return
		}
		i = digits(d, i+1)
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			s.Fail()
			return
		}
		i = digits(d, i)
	}
	s.pos = i
}

func digits(d []byte, i int) int {
	for i < len(d) && '0' <= d[i] && d[i] <= '9' {
		i++
	}
	return i
}

// Skip moves past the next value, whatever it is, checking it is valid.
func (s *Scanner) Skip() {
	switch c := s.peek(); {
	case c == '"':
		s.scanString()
	case c == '{' || c == '[':
		s.skipContainer()
	case c == 't':
		s.literal("true")
	case c == 'f':
		s.literal("false")
	case c == 'n':
		s.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		s.number()
	default:
		s.Fail()
	}
}

// Raw moves past the next value and returns its bytes, as encoding/json
// hands them to a json.Unmarshaler: no surrounding white space. The bytes
// are the input's: copy them to keep them.
func (s *Scanner) Raw() []byte {
	s.skipSpace()
	start := s.pos
	s.Skip()
	if s.failed {
		return nil
	}
	return s.data[start:s.pos]
}

// skipContainer moves past the array or object at the cursor, iteratively:
// a stack of the open containers' closing brackets replaces recursion.
func (s *Scanner) skipContainer() {
	var stack [64]byte
	open := stack[:0]
	for !s.failed {
		// The cursor is at a '{' or a '[': open it.
		if s.depth+len(open) >= MaxDepth {
			s.Fail()
			return
		}
		closer := byte(']')
		if s.data[s.pos] == '{' {
			closer = '}'
		}
		s.pos++
		open = append(open, closer)
		if s.peek() != closer {
			if s.element(closer) {
				continue // its first value is a container: open that
			}
		} else {
			s.pos++
			if open = open[:len(open)-1]; len(open) == 0 {
				return
			}
		}
		// After a value: the next one in the innermost open container, or
		// its end.
		for !s.failed {
			closer = open[len(open)-1]
			c := s.peek()
			if c == ',' {
				s.pos++
				if s.element(closer) {
					break // a container: open it
				}
				continue
			}
			if c != closer {
				s.Fail()
				return
			}
			s.pos++
			if open = open[:len(open)-1]; len(open) == 0 {
				return
			}
		}
	}
}

// element reads one element of a container that closer closes: for an
// object its key and colon first. It moves past a scalar value; for an
// object or array it reports true and stops at its opening bracket.
func (s *Scanner) element(closer byte) bool {
	if closer == '}' {
		if s.peek() != '"' {
			s.Fail()
			return false
		}
		s.scanString()
		if s.peek() != ':' {
			s.Fail()
			return false
		}
		s.pos++
	}
	switch s.peek() {
	case '{', '[':
		return true
	case '"':
		s.scanString()
		return false
	}
	s.Skip()
	return false
}
