package jsonscan

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Object reads the members of an object, in order:
//
//	o, ok := s.Object()
//	for o.Next() {
//		switch o.Field(fields) { ... default: s.Skip() }
//	}
//
// Each member's value must be read (or skipped) before the next Next.
type Object struct {
	s       *Scanner
	started bool
	seen    uint64 // the fields met so far, by index
	next    int    // the index after the last field found
	key     []byte // the member's key as written between the quotes
	plain   bool   // whether key is the decoded key as it is
	literal []byte // the key with its quotes, to decode when not plain
}

// Object starts reading the object that is next. It reports false,
// consuming nothing, if the next value is anything else (a null included)
// or the Scanner gave up.
func (s *Scanner) Object() (Object, bool) {
	if s.peek() != '{' {
		return Object{}, false
	}
	if s.depth++; s.depth > MaxDepth {
		s.Fail()
		return Object{}, false
	}
	s.pos++
	return Object{s: s}, true
}

// Next moves to the next member and reads its key and colon. It reports
// false at the end of the object, which it consumes, and if the Scanner
// gave up.
func (o *Object) Next() bool {
	s := o.s
	c := s.peek()
	switch {
	case s.failed:
		return false
	case c == '}':
		s.pos++
		s.depth--
		return false
	case o.started:
		if c != ',' {
			s.Fail()
			return false
		}
		s.pos++
		c = s.peek()
	}
	o.started = true
	if c != '"' {
		s.Fail()
		return false
	}
	start := s.pos
	o.key, o.plain = s.scanString()
	o.literal = s.data[start:s.pos]
	if s.peek() != ':' {
		s.Fail()
		return false
	}
	s.pos++
	return true
}

// Key returns the current member's key, decoded: for maps.
func (o *Object) Key() string {
	if o.plain {
		return o.s.copyString(o.key)
	}
	return o.s.unquote(o.literal)
}

// Field returns the index in f of the field the current member sets, as
// encoding/json matches keys to a struct's fields, or -1 for a key that
// matches none (skip its value). It gives up, and returns -1, on a field
// met before in this object and on a key that matches a field only
// case-insensitively, both of which encoding/json accepts with rules not
// worth copying. Every member of o must be looked up in the same f.
func (o *Object) Field(f *Fields) int {
	key := o.key
	if !o.plain {
		key = []byte(o.s.unquote(o.literal))
	}
	// Members tend to come in the order of the fields: try the one after
	// the last found first.
	if i := o.next; i < len(f.names) && string(key) == f.names[i] {
		return o.found(i)
	}
	for i, name := range f.names {
		if string(key) == name {
			return o.found(i)
		}
	}
	if !foldable(key) {
		// Without upper case or non-ASCII letters, the key folds to a
		// field's folded name only if it is that (lower case) name.
		return -1
	}
	var buf [64]byte
	folded := appendFoldedName(buf[:0], key)
	for _, name := range f.folded {
		if string(folded) == name {
			o.s.Fail()
			return -1
		}
	}
	return -1
}

func (o *Object) found(i int) int {
	if o.seen&(1<<i) != 0 {
		o.s.Fail()
		return -1
	}
	o.seen |= 1 << i
	o.next = i + 1
	return i
}

func foldable(key []byte) bool {
	for _, c := range key {
		if 'A' <= c && c <= 'Z' || c >= utf8.RuneSelf {
			return true
		}
	}
	return false
}

// Fields are the JSON names of a struct's fields, as encoding/json reads
// them from the struct tags.
type Fields struct {
	names  []string
	folded []string
}

// NewFields returns the fields of the given names, at most 64, each made
// of lower-case ASCII letters, digits and underscores (what Field's fast
// comparison relies on). It panics otherwise: the names are constants of
// the caller.
func NewFields(names ...string) *Fields {
	if len(names) > 64 {
		panic("jsonscan: more than 64 fields")
	}
	f := &Fields{names: names}
	for _, n := range names {
		for _, c := range []byte(n) {
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_') {
				panic(fmt.Sprintf("jsonscan: field name %q is not lower-case ASCII", n))
			}
		}
		f.folded = append(f.folded, string(appendFoldedName(nil, []byte(n))))
	}
	return f
}

// appendFoldedName and foldRune are encoding/json's (fold.go, Go 1.26),
// so that Field finds the keys encoding/json would match
// case-insensitively: foldName(x) == foldName(y) exactly when
// bytes.EqualFold(x, y).
func appendFoldedName(out, in []byte) []byte {
	for i := 0; i < len(in); {
		// Handle single-byte ASCII.
		if c := in[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			out = append(out, c)
			i++
			continue
		}
		// Handle multi-byte Unicode.
		r, n := utf8.DecodeRune(in[i:])
		out = utf8.AppendRune(out, foldRune(r))
		i += n
	}
	return out
}

func foldRune(r rune) rune {
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}

// Array reads the elements of an array, in order:
//
//	a, ok := s.Array()
//	for a.Next() {
//		s.String(&v)
//	}
//
// Each element must be read (or skipped) before the next Next.
type Array struct {
	s       *Scanner
	started bool
}

// Array starts reading the array that is next. It reports false,
// consuming nothing, if the next value is anything else (a null included)
// or the Scanner gave up.
func (s *Scanner) Array() (Array, bool) {
	if s.peek() != '[' {
		return Array{}, false
	}
	if s.depth++; s.depth > MaxDepth {
		s.Fail()
		return Array{}, false
	}
	s.pos++
	return Array{s: s}, true
}

// Next reports whether an element follows, consuming the comma before it;
// at the end of the array it consumes the bracket and reports false, as
// it does if the Scanner gave up.
func (a *Array) Next() bool {
	s := a.s
	c := s.peek()
	switch {
	case s.failed:
		return false
	case c == ']':
		s.pos++
		s.depth--
		return false
	case a.started:
		if c != ',' {
			s.Fail()
			return false
		}
		s.pos++
		if s.peek() == ']' { // a trailing comma
			s.Fail()
			return false
		}
	}
	a.started = true
	return true
}
