// Package redact hides the secrets of connection strings, in what is shown
// of them and in error texts that may quote them. A connection string is a
// URL (postgres://, http://, ...) or a libpq key=value string
// ("host=db password=..."); its secrets are the password of a URL's user
// info and the values of secret-looking keys (password, token, ...: see
// secretKey) in a URL's query or a key=value string.
//
// It reads a string as its writer may have meant it, not only as a parser
// would: a password with an unescaped '/', '?', '#' or '@' makes a URL
// parse differently (or not at all), and the text a parser reports then
// quotes a piece of the password as a port, a path or a key. So a URL's
// password is everything from the first ':' after "scheme://" to the last
// '@' of the string, and an unquoted key=value password runs up to the next
// " key=". That hides too much now and then (a query value with an '@'),
// never too little.
//
// It imports only the standard library, so that every package of the
// module may use it: persistence, clients and internal/settings do.
package redact

import (
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Mask replaces each secret.
const Mask = "xxxxx"

// Hidden is what URL shows of a string that is neither a URL nor a
// key=value string: all of it may be a secret.
const Hidden = "(redacted)"

// URL returns s with its secrets replaced by Mask, or Hidden when s is
// neither a URL ("scheme://...") nor a key=value string. The result never
// contains a secret of s, whether s is well formed or not.
func URL(s string) string {
	if s == "" {
		return ""
	}
	spans, ok := secretSpans(s)
	if !ok {
		return Hidden
	}
	slices.SortFunc(spans, func(a, b span) int { return a.from - b.from })
	var merged []span // overlapping secrets as one
	for _, sp := range spans {
		if n := len(merged); n > 0 && sp.from <= merged[n-1].to {
			merged[n-1].to = max(merged[n-1].to, sp.to)
			continue
		}
		merged = append(merged, sp)
	}
	var b strings.Builder
	at := 0
	for _, sp := range merged {
		b.WriteString(s[at:sp.from])
		b.WriteString(Mask)
		at = sp.to
	}
	b.WriteString(s[at:])
	return b.String()
}

// Secrets returns the secrets URL hides in s (all of s when URL shows
// Hidden), each in every form an error text may carry it (see Forms).
func Secrets(s string) []string {
	if s == "" {
		return nil
	}
	spans, ok := secretSpans(s)
	if !ok {
		return Forms(s)
	}
	var out []string
	for _, sp := range spans {
		out = appendForms(out, s[sp.from:sp.to], sp.decode)
	}
	return sortForms(out)
}

// Forms returns secret as written, percent-decoded, percent-encoded (as a
// query value, a path and a URL's user info do: see appendForms) and escaped as Go's %q
// and libpq's quoting do, longest first: the forms in which a library's
// error may quote it.
func Forms(secret string) []string {
	if secret == "" {
		return nil
	}
	return sortForms(appendForms(nil, secret, nil))
}

// appendForms appends the forms of raw and of what it may stand for:
// decoded by decode, and percent-decoded both ways ('+' kept, as in a
// path or user info, and as a space, as in a query: a writer may have
// escaped a password for the wrong part of the URL).
func appendForms(out []string, raw string, decode func(string) (string, error)) []string {
	bases := []string{raw}
	for _, dec := range []func(string) (string, error){decode, url.PathUnescape, url.QueryUnescape} {
		if dec == nil {
			continue
		}
		if d, err := dec(raw); err == nil && !slices.Contains(bases, d) {
			bases = append(bases, d)
		}
	}
	add := func(f string) {
		if f != "" && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	for _, p := range bases {
		add(p)
		add(url.QueryEscape(p))
		add(url.PathEscape(p))
		add(url.UserPassword("", p).String()[1:]) // ":" + escaped password; drop the ':'
		q := strconv.Quote(p)
		add(q[1 : len(q)-1])
		add(strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(p))
	}
	return out
}

// sortForms orders forms longest first, so that a form containing another
// is replaced whole.
func sortForms(forms []string) []string {
	slices.SortStableFunc(forms, func(a, b string) int { return len(b) - len(a) })
	return forms
}

// Text returns msg with each of secrets (from Secrets or Forms) replaced by
// Mask.
func Text(msg string, secrets []string) string {
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, Mask)
		}
	}
	return msg
}

// Error returns err with each of secrets replaced by Mask in its text. The
// result wraps err, so errors.Is and errors.As still see its causes; err
// itself comes back when its text holds none of them. Only the text is
// redacted: a caller that digs a cause out of the chain and prints that
// bypasses it.
func Error(err error, secrets []string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	hidden := Text(msg, secrets)
	if hidden == msg {
		return err
	}
	return &redacted{msg: hidden, err: err}
}

// ErrInSecret is Check's error when a value is malformed only within its
// secrets.
var ErrInSecret = errors.New("malformed in the part hidden as " + Mask +
	" (the password or token): percent-encode its special characters in a URL (@ : / ? # % & and spaces; @ as %40), quote it in a key=value string ('...', with \\' for a quote)")

// Check runs check on s and returns an error that holds none of s's
// secrets: nil when check accepts s; check's error for URL(s) when check
// refuses that too (it describes the trouble from what may be shown);
// ErrInSecret when only s itself is refused. check's error for s is
// returned as is only when s has no secret.
func Check(s string, check func(string) error) error {
	err := check(s)
	if err == nil {
		return nil
	}
	shown := URL(s)
	if shown == s {
		return err
	}
	if err := check(shown); err != nil {
		return err
	}
	return ErrInSecret
}

type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }

// span is s[from:to], a secret; decode turns it into the value it stands
// for (nil: as written).
type span struct {
	from, to int
	decode   func(string) (string, error)
}

// Scheme returns the scheme of s when s is URL-shaped ("scheme://...", the
// scheme as RFC 3986 spells one), whether or not the rest parses.
func Scheme(s string) (scheme string, ok bool) {
	if i := strings.Index(s, "://"); i > 0 && isScheme(s[:i]) {
		return s[:i], true
	}
	return "", false
}

// secretSpans finds the secrets of s; they may overlap. ok is false when s is
// neither a URL nor a key=value string.
func secretSpans(s string) (spans []span, ok bool) {
	if scheme, ok := Scheme(s); ok {
		return urlSpans(s, len(scheme)+len("://")), true
	}
	if strings.Contains(s, "=") {
		return keyValueSpans(s), true
	}
	return nil, false
}

// isScheme reports whether s is a URL scheme (RFC 3986: a letter, then
// letters, digits, '+', '-', '.').
func isScheme(s string) bool {
	for i, r := range s {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z':
		case i > 0 && ('0' <= r && r <= '9' || r == '+' || r == '-' || r == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// urlSpans finds the password (from the first ':' of the user info to the
// last '@') and the secret query values of the URL s whose authority starts
// at start.
func urlSpans(s string, start int) []span {
	var spans []span
	if at := strings.LastIndex(s[start:], "@"); at >= 0 {
		at += start
		if c := strings.Index(s[start:at], ":"); c >= 0 && start+c+1 < at {
			spans = append(spans, span{from: start + c + 1, to: at, decode: url.PathUnescape})
		}
	}
	// The query from the first '?', which may be the password's own: its
	// spans may then overlap the password's (URL merges them).
	q := strings.Index(s[start:], "?")
	if q < 0 {
		return spans
	}
	for pos := start + q + 1; pos < len(s); {
		pair := pos + strings.IndexByte(s[pos:]+"&", '&') // the end of key=value
		eq := strings.IndexByte(s[pos:pair], '=')
		if eq < 0 {
			pos = pair + 1
			continue
		}
		key := s[pos : pos+eq]
		if k, err := url.QueryUnescape(key); err == nil {
			key = k
		}
		from := pos + eq + 1
		if !secretKey(key) {
			pos = pair + 1
			continue
		}
		// A secret runs to the next "&key=", past any '&' or '#' of its own.
		to := nextPair(s, from)
		if from < to {
			spans = append(spans, span{from: from, to: to, decode: url.QueryUnescape})
		}
		pos = to + 1
	}
	return spans
}

// nextPair returns where the next "&key=" of the query s after i starts
// (its '&'), or len(s).
func nextPair(s string, i int) int {
	for j := i; j < len(s); j++ {
		if s[j] != '&' {
			continue
		}
		k := j + 1
		for k < len(s) && s[k] != '&' && s[k] != '=' && s[k] != '#' {
			k++
		}
		if k > j+1 && k < len(s) && s[k] == '=' {
			return j
		}
	}
	return len(s)
}

// keyValueSpans finds the values of the secret keys of the libpq
// key=value string s: a quoted value up to its closing quote (the end of
// s if there is none), an unquoted one up to the whitespace before the
// next key= (libpq would stop at the first whitespace, leaving the rest of
// a password with a space to be quoted as a key in its error).
func keyValueSpans(s string) []span {
	var spans []span
	i := 0
	for i < len(s) {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		k := i
		for i < len(s) && !isSpace(s[i]) && s[i] != '=' {
			i++
		}
		key := s[k:i]
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i >= len(s) || s[i] != '=' {
			continue // not key=value: go on with the next word
		}
		i++ // '='
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		from := i
		switch {
		case i < len(s) && s[i] == '\'':
			from = i + 1
			i = from
			for i < len(s) && s[i] != '\'' {
				if s[i] == '\\' {
					i++
				}
				i++
			}
			i = min(i, len(s))
			if secretKey(key) && from < i {
				spans = append(spans, span{from: from, to: i, decode: unescapeKeyValue})
			}
			if i < len(s) {
				i++ // the closing quote
			}
		case secretKey(key):
			i = nextKey(s, i)
			to := i
			for to > from && isSpace(s[to-1]) {
				to--
			}
			if from < to {
				spans = append(spans, span{from: from, to: to, decode: unescapeKeyValue})
			}
		default:
			for i < len(s) && !isSpace(s[i]) {
				if s[i] == '\\' {
					i++
				}
				i++
			}
			i = min(i, len(s))
		}
	}
	return spans
}

// nextKey returns where the next " key=" of s after i starts (its
// whitespace), or len(s).
func nextKey(s string, i int) int {
	for j := i; j < len(s); j++ {
		if !isSpace(s[j]) || (j > 0 && s[j-1] == '\\') {
			continue
		}
		k := j
		for k < len(s) && isSpace(s[k]) {
			k++
		}
		w := k
		for w < len(s) && isKeyByte(s[w]) {
			w++
		}
		if w == k {
			continue
		}
		for w < len(s) && isSpace(s[w]) {
			w++
		}
		if w < len(s) && s[w] == '=' {
			return j
		}
	}
	return len(s)
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func isKeyByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_'
}

// unescapeKeyValue undoes libpq's backslash escapes.
func unescapeKeyValue(v string) (string, error) {
	if !strings.Contains(v, `\`) {
		return v, nil
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) {
			i++
		}
		b.WriteByte(v[i])
	}
	return b.String(), nil
}

// secretKey reports whether a query or key=value key names a secret:
// passwords (password, sslpassword, passwd, pwd), tokens, keys and
// signatures of signed URLs, credentials. sslkey and sslcert name files
// and are shown.
func secretKey(key string) bool {
	k := strings.ToLower(key)
	for _, part := range []string{"pass", "pwd", "secret", "token", "credential", "auth", "signature"} {
		if strings.Contains(k, part) {
			return true
		}
	}
	switch k {
	case "key", "apikey", "api_key", "api-key", "access_key", "sig":
		return true
	}
	return false
}
