// Package settings reads a program's configuration from environment
// variables and command-line flags (flags win), built on the standard flag
// package. Every setting has both names, a default and a check; a bad value
// is reported naming the setting, and the caller exits with code 2.
//
// It imports only the standard library; the cmd/ programs use it.
package settings

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// ExitUsage is the exit code for a configuration error.
const ExitUsage = 2

// Error is a bad value for one setting.
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
}

type entry struct {
	env, flag, usage, def string
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
	s.fs.Var(flagValue{e}, e.flag, e.usage)
}

type flagValue struct{ e *entry }

func (v flagValue) String() string {
	if v.e == nil || v.e.get == nil {
		return ""
	}
	return v.e.get()
}
func (v flagValue) Set(s string) error { return v.e.set(s) }

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

// SecretURL registers a URL setting whose password, if any, is never
// printed (the rest is, so operators can see where it points).
func (s *Set) SecretURL(p *string, env, flagName, usage string) {
	s.String(p, env, flagName, "", usage, nil)
	e := s.entries[len(s.entries)-1]
	e.secret = true
	e.redact = RedactURL
}

// RedactURL returns u with the password of its user info replaced; a value
// that does not parse as a URL is hidden whole.
func RedactURL(u string) string {
	if u == "" {
		return ""
	}
	parsed, err := url.Parse(u)
	if err != nil || parsed.Scheme == "" {
		return "(redacted)"
	}
	if _, has := parsed.User.Password(); has {
		parsed.User = url.UserPassword(parsed.User.Username(), "xxxxx")
	}
	q := parsed.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		parsed.RawQuery = q.Encode()
	}
	return parsed.String()
}

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
			if f < minimum || f > maximum {
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
	s.add(&entry{env: env, flag: flagName, usage: usage, def: def.String(),
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
	if err := s.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ErrHelp
		}
		return s.flagError(err)
	}
	if s.fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: every setting is a flag or an environment variable", s.fs.Arg(0))
	}
	s.fs.Visit(func(f *flag.Flag) { s.byFlag[f.Name].from = "flag" })
	return nil
}

// flagError turns the flag package's message into an *Error when it can tell
// which flag was bad.
func (s *Set) flagError(err error) error {
	msg := err.Error()
	// flag's format: invalid value "x" for flag -name: reason
	if i := strings.Index(msg, " for flag -"); i >= 0 && strings.HasPrefix(msg, "invalid value ") {
		rest := msg[i+len(" for flag -"):]
		if j := strings.Index(rest, ": "); j >= 0 {
			if e := s.byFlag[rest[:j]]; e != nil {
				value, _ := strconv.Unquote(msg[len("invalid value "):i])
				return &Error{Env: e.env, Flag: e.flag, Value: s.shown(e, value), Err: errors.New(rest[j+2:])}
			}
		}
	}
	return err
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

// PrintUsage writes every setting with its flag, environment variable,
// default and meaning.
func (s *Set) PrintUsage(w io.Writer) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FLAG\tENVIRONMENT\tDEFAULT\tMEANING")
	for _, e := range s.entries {
		def := e.def
		if def == "" {
			def = "(none)"
		}
		fmt.Fprintf(tw, "-%s\t%s\t%s\t%s\n", e.flag, e.env, def, e.usage)
	}
	tw.Flush()
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
