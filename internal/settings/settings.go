// Package settings reads a program's configuration from environment
// variables and command-line flags (flags win), built on the standard flag
// package. Every setting has both names, a default and a check; a bad value
// is reported naming the setting, and the caller exits with code 2.
//
// Usage strings are Markdown: backquotes mark code (values, names, paths).
// PrintUsage prints a set for -h as plain text, without them; PrintMarkdown
// as a table for the documentation (proving/docs), with them.
//
// A secret is never printed: not in the effective configuration, not in an
// error. A secret URL is shown with its password masked (internal/redact).
//
// It imports only the standard library and internal/redact; the cmd/
// programs use it.
package settings

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/patchflow/patchflow/internal/redact"
)

// ExitUsage is the exit code for a configuration error.
const ExitUsage = 2

// Error is a bad value for one setting. Value is the value as shown: a
// secret's redacted (a secret URL's password masked, other secrets
// hidden), so Error prints no secret as long as Err carries none (a
// setting's check must not quote a secret value).
type Error struct {
	Env, Flag string
	Value     string
	Err       error
}

func (e *Error) Error() string {
	return fmt.Sprintf("invalid setting %s (flag -%s) = %q: %v", e.Env, e.Flag, e.Value, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Set is a group of settings of one program.
type Set struct {
	fs      *flag.FlagSet
	entries []*entry
	byFlag  map[string]*entry
	// flagErr is the bad flag value the flag package is reporting, as an
	// *Error (its own message quotes the value whole).
	flagErr *Error
}

type entry struct {
	env, flag, usage, def string
	shownDef              string // how the default is shown; empty: def itself
	secret                bool
	boolean               bool                // a switch: the flag alone means true
	redact                func(string) string // how a secret is shown; nil: not at all
	set                   func(string) error
	get                   func() string
	from                  string // "default", "env" or "flag"
}

// New returns an empty set for the program called name.
func New(name string) *Set {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &Set{fs: fs, byFlag: map[string]*entry{}}
}

func (s *Set) add(e *entry) {
	e.from = "default"
	s.entries = append(s.entries, e)
	s.byFlag[e.flag] = e
	s.fs.Var(flagValue{s, e}, e.flag, e.usage)
}

type flagValue struct {
	s *Set
	e *entry
}

// String is the flag package's view of the value (it compares it with the
// zero value's for its own usage text, which Set never prints).
func (v flagValue) String() string {
	if v.e == nil || v.e.get == nil {
		return ""
	}
	return v.e.get()
}

func (v flagValue) Set(x string) error {
	if err := v.e.set(x); err != nil {
		v.s.flagErr = &Error{Env: v.e.env, Flag: v.e.flag, Value: v.s.shown(v.e, x), Err: err}
		return err
	}
	return nil
}

// IsBoolFlag lets a Bool setting's flag stand alone (-json for -json=true),
// as the flag package's own booleans do.
func (v flagValue) IsBoolFlag() bool { return v.e != nil && v.e.boolean }

// String registers a string setting. check may be nil.
func (s *Set) String(p *string, env, flagName, def, usage string, check func(string) error) {
	*p = def
	s.add(&entry{env: env, flag: flagName, usage: usage, def: def,
		set: func(v string) error {
			if check != nil {
				if err := check(v); err != nil {
					return err
				}
			}
			*p = v
			return nil
		},
		get: func() string { return *p }})
}

// Secret registers a string setting whose value is never printed.
func (s *Set) Secret(p *string, env, flagName, usage string) {
	s.String(p, env, flagName, "", usage, nil)
	s.entries[len(s.entries)-1].secret = true
}

// SecretURL registers a URL (or key=value connection string) setting whose
// password, if any, is never printed (the rest is, so operators can see
// where it points): see RedactURL. check may be nil; its error must not
// quote the value (persistence.CheckURL does not).
func (s *Set) SecretURL(p *string, env, flagName, usage string, check func(string) error) {
	s.String(p, env, flagName, "", usage, check)
	s.ShowWith(flagName, RedactURL)
}

// ShowWith makes flagName's setting a secret shown through show, wherever
// settings are printed: for values that may carry a secret in part.
func (s *Set) ShowWith(flagName string, show func(string) string) {
	e := s.byFlag[flagName]
	if e == nil {
		panic("settings: unknown flag " + flagName)
	}
	e.secret, e.redact = true, show
}

// RedactURL returns u with its password (of the user info, or a
// password=, token=... value of its query or key=value string) masked as
// xxxxx, well formed or not; a value that is neither a URL nor a key=value
// string is hidden whole (see internal/redact).
func RedactURL(u string) string { return redact.URL(u) }

// Int registers an integer setting with an inclusive lower bound.
func (s *Set) Int(p *int, env, flagName string, def, minimum int, usage string) {
	*p = def
	s.add(&entry{env: env, flag: flagName, usage: usage, def: strconv.Itoa(def),
		set: func(v string) error {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return errors.New("not an integer")
			}
			if n < minimum {
				return fmt.Errorf("must be at least %d", minimum)
			}
			*p = n
			return nil
		},
		get: func() string { return strconv.Itoa(*p) }})
}

// Float registers a number setting within [minimum, maximum].
func (s *Set) Float(p *float64, env, flagName string, def, minimum, maximum float64, usage string) {
	*p = def
	s.add(&entry{env: env, flag: flagName, usage: usage, def: strconv.FormatFloat(def, 'g', -1, 64),
		set: func(v string) error {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return errors.New("not a number")
			}
			if !(f >= minimum && f <= maximum) { // NaN too: ParseFloat accepts "NaN"
				return fmt.Errorf("must be from %g to %g", minimum, maximum)
			}
			*p = f
			return nil
		},
		get: func() string { return strconv.FormatFloat(*p, 'g', -1, 64) }})
}

// Duration registers a duration setting (Go syntax: 250ms, 20s, 1m) with an
// inclusive lower bound.
func (s *Set) Duration(p *time.Duration, env, flagName string, def, minimum time.Duration, usage string) {
	*p = def
	s.add(&entry{env: env, flag: flagName, usage: usage, def: shortDuration(def),
		set: func(v string) error {
			d, err := time.ParseDuration(strings.TrimSpace(v))
			if err != nil {
				return errors.New("not a duration (use e.g. 250ms, 20s, 1m)")
			}
			if d < minimum {
				return fmt.Errorf("must be at least %v", minimum)
			}
			*p = d
			return nil
		},
		get: func() string { return p.String() }})
}

// shortDuration is d as time.Duration.String writes it without zero
// trailing units: 2m, not 2m0s; 24h, not 24h0m0s. It parses back to d.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Bool registers a boolean setting. Its flag alone means true (-name is
// -name=true); a value goes after "=" (-name=false).
func (s *Set) Bool(p *bool, env, flagName string, def bool, usage string) {
	*p = def
	s.add(&entry{env: env, flag: flagName, usage: usage, def: strconv.FormatBool(def), boolean: true,
		set: func(v string) error {
			b, err := strconv.ParseBool(strings.TrimSpace(v))
			if err != nil {
				return errors.New("not a boolean (true or false)")
			}
			*p = b
			return nil
		},
		get: func() string { return strconv.FormatBool(*p) }})
}

// ErrHelp is returned by Parse when -h or -help was given.
var ErrHelp = flag.ErrHelp

// Parse applies environment values (lookup, usually os.LookupEnv), then
// args. It returns an *Error naming the first bad setting, or ErrHelp.
func (s *Set) Parse(args []string, lookup func(string) (string, bool)) error {
	for _, e := range s.entries {
		if v, ok := lookup(e.env); ok {
			if err := e.set(v); err != nil {
				return &Error{Env: e.env, Flag: e.flag, Value: s.shown(e, v), Err: err}
			}
			e.from = "env"
		}
	}
	s.flagErr = nil
	if err := s.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ErrHelp
		}
		if s.flagErr != nil {
			return s.flagErr
		}
		// "bad flag syntax: ---name=value" quotes the argument whole.
		if arg, ok := strings.CutPrefix(err.Error(), "bad flag syntax: "); ok {
			name, _, _ := strings.Cut(arg, "=")
			return fmt.Errorf("bad flag syntax: %s", name)
		}
		return err
	}
	secretFlag := false
	s.fs.Visit(func(f *flag.Flag) {
		e := s.byFlag[f.Name]
		e.from = "flag"
		secretFlag = secretFlag || e.secret
	})
	if s.fs.NArg() > 0 {
		// A stray word may be a connection string, or part of a secret
		// flag's value that missed its quotes.
		stray := s.fs.Arg(0)
		if _, isURL := redact.Scheme(stray); isURL || strings.Contains(stray, "=") {
			stray = redact.URL(stray)
		}
		if secretFlag {
			stray = redact.Hidden
		}
		return fmt.Errorf("unexpected argument %q: every setting is a flag or an environment variable", stray)
	}
	return nil
}

func (s *Set) shown(e *entry, v string) string {
	switch {
	case !e.secret || v == "":
		return v
	case e.redact != nil:
		return e.redact(v)
	}
	return "(redacted)"
}

// Invalid reports a bad combination of values, naming flagName's setting.
func (s *Set) Invalid(flagName string, err error) *Error {
	e := s.byFlag[flagName]
	if e == nil {
		panic("settings: unknown flag " + flagName)
	}
	return &Error{Env: e.env, Flag: e.flag, Value: s.shown(e, e.get()), Err: err}
}

// ShowDefault sets how flagName's default is shown by PrintUsage and
// PrintMarkdown, for a default that is no value of its own: "(required)", or
// one derived from another setting. text is Markdown, like a usage string.
func (s *Set) ShowDefault(flagName, text string) {
	e := s.byFlag[flagName]
	if e == nil {
		panic("settings: unknown flag " + flagName)
	}
	e.shownDef = text
}

// usageWidth is the width PrintUsage wraps meanings at, indent included.
const usageWidth = 80

// PrintUsage writes every setting as a plain-text table: its flag,
// environment variable and default aligned on one line, its meaning wrapped
// below it, indented.
func (s *Set) PrintUsage(w io.Writer) {
	rows := [][3]string{{"FLAG", "ENVIRONMENT", "DEFAULT"}}
	for _, e := range s.entries {
		rows = append(rows, [3]string{"-" + e.flag, e.env, plain(s.defaultText(e))})
	}
	var width [2]int
	for _, r := range rows {
		width[0], width[1] = max(width[0], len(r[0])), max(width[1], len(r[1]))
	}
	for i, r := range rows {
		fmt.Fprintf(w, "%-*s  %-*s  %s\n", width[0], r[0], width[1], r[1], r[2])
		if i == 0 {
			fmt.Fprintln(w, "    MEANING")
			continue
		}
		for _, line := range wrap(plain(s.entries[i-1].usage), usageWidth-4) {
			fmt.Fprintln(w, "    "+line)
		}
	}
}

// PrintMarkdown writes every setting as a Markdown table, one row each in
// the order of PrintUsage: flag, environment variable, default, meaning.
func (s *Set) PrintMarkdown(w io.Writer) {
	fmt.Fprintln(w, "| flag | environment | default | meaning |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, e := range s.entries {
		def := s.defaultText(e)
		if e.shownDef == "" && e.def != "" {
			def = "`" + e.def + "`"
		}
		fmt.Fprintf(w, "| `-%s` | `%s` | %s | %s |\n", e.flag, e.env, cell(def), cell(e.usage))
	}
}

// defaultText is the default as PrintUsage shows it, before backquotes are
// dropped.
func (s *Set) defaultText(e *entry) string {
	switch {
	case e.shownDef != "":
		return e.shownDef
	case e.def == "":
		return "(none)"
	}
	return e.def
}

// plain drops the backquotes that mark code in Markdown.
func plain(md string) string { return strings.ReplaceAll(md, "`", "") }

// cell makes text safe inside a Markdown table cell.
func cell(text string) string {
	return strings.ReplaceAll(strings.ReplaceAll(text, "|", `\|`), "\n", " ")
}

// wrap breaks text into lines of at most width characters at spaces; a
// word longer than width gets a line of its own.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		switch {
		case line == "":
			line = word
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) <= width:
			line += " " + word
		default:
			lines = append(lines, line)
			line = word
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// Effective returns key/value pairs of the configuration in force, secrets
// redacted, for logging at start.
func (s *Set) Effective() []any {
	out := make([]any, 0, 2*len(s.entries))
	for _, e := range s.entries {
		out = append(out, e.env, s.shown(e, e.get()))
	}
	return out
}

// Envs returns the environment variable of every setting, in the order
// they were registered: what a deployment may set.
func (s *Set) Envs() []string {
	out := make([]string, 0, len(s.entries))
	for _, e := range s.entries {
		out = append(out, e.env)
	}
	return out
}

// Without returns the settings of s that other lacks (by flag name), for a
// table of what one build adds to another's. The result is for printing
// only: its settings write to s's variables.
func (s *Set) Without(other *Set) *Set {
	out := New(s.fs.Name())
	for _, e := range s.entries {
		if _, ok := other.byFlag[e.flag]; !ok {
			c := *e
			out.add(&c)
		}
	}
	return out
}
