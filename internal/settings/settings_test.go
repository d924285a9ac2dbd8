package settings_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/patchflow/patchflow/internal/settings"
)

type conf struct {
	name   string
	n      int
	d      time.Duration
	on     bool
	secret string
}

func newSet(c *conf) *settings.Set {
	s := settings.New("t")
	s.String(&c.name, "APP_NAME", "name", "def", "a name", nil)
	s.Int(&c.n, "APP_N", "n", 4, 1, "a count")
	s.Duration(&c.d, "APP_WAIT", "wait", time.Second, time.Millisecond, "a wait")
	s.Bool(&c.on, "APP_ON", "on", false, "a switch")
	s.Secret(&c.secret, "APP_PASSWORD", "password", "a password")
	return s
}

func env(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestDefaultsEnvAndFlags(t *testing.T) {
	var c conf
	s := newSet(&c)
	if err := s.Parse([]string{"-n", "9"}, env("APP_NAME", "from-env", "APP_N", "7", "APP_WAIT", "250ms", "APP_ON", "true")); err != nil {
		t.Fatal(err)
	}
	if c.name != "from-env" || c.n != 9 || c.d != 250*time.Millisecond || !c.on {
		t.Fatalf("got %+v; want env values with the flag winning for n", c)
	}
	var d conf
	if err := newSet(&d).Parse(nil, env()); err != nil {
		t.Fatal(err)
	}
	if d.name != "def" || d.n != 4 || d.d != time.Second || d.on {
		t.Fatalf("defaults %+v", d)
	}
}

// A switch's flag alone turns it on, and =false turns off what the
// environment turned on.
func TestBoolFlagStandsAlone(t *testing.T) {
	var c conf
	if err := newSet(&c).Parse([]string{"-on", "-n", "5"}, env()); err != nil || !c.on || c.n != 5 {
		t.Fatalf("-on -n 5: %+v, %v; want on and n 5", c, err)
	}
	var d conf
	if err := newSet(&d).Parse([]string{"-on=false"}, env("APP_ON", "true")); err != nil || d.on {
		t.Fatalf("-on=false over APP_ON=true: %+v, %v; want off", d, err)
	}
}

func TestBadValuesNameTheSetting(t *testing.T) {
	cases := []struct {
		args []string
		env  []string
		want string
	}{
		{nil, []string{"APP_N", "zero"}, "APP_N"},
		{nil, []string{"APP_N", "0"}, "APP_N"},
		{[]string{"-n", "-3"}, nil, "APP_N"},
		{nil, []string{"APP_WAIT", "soon"}, "APP_WAIT"},
		{[]string{"-wait", "1us"}, nil, "APP_WAIT"},
		{nil, []string{"APP_ON", "maybe"}, "APP_ON"},
	}
	for _, c := range cases {
		var cf conf
		err := newSet(&cf).Parse(c.args, env(c.env...))
		var se *settings.Error
		if !errors.As(err, &se) || se.Env != c.want {
			t.Errorf("args %v env %v: error %v, want one naming %s", c.args, c.env, err, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "-"+se.Flag) {
			t.Errorf("message %q names neither %s nor its flag", err, c.want)
		}
	}
}

func TestSecretsAreRedacted(t *testing.T) {
	var c conf
	s := newSet(&c)
	if err := s.Parse(nil, env("APP_PASSWORD", "hunter2")); err != nil {
		t.Fatal(err)
	}
	if c.secret != "hunter2" {
		t.Fatal("secret not read")
	}
	eff := s.Effective()
	for _, v := range eff {
		if v == "hunter2" {
			t.Fatalf("effective configuration leaks the secret: %v", eff)
		}
	}
	var buf bytes.Buffer
	s.PrintUsage(&buf)
	if strings.Contains(buf.String(), "hunter2") || !strings.Contains(buf.String(), "APP_PASSWORD") {
		t.Fatalf("usage: %s", buf.String())
	}
}

func TestSecretURLShowsWhereButNotThePassword(t *testing.T) {
	var u string
	s := settings.New("t")
	s.SecretURL(&u, "DATABASE_URL", "database-url", "database", nil)
	if err := s.Parse(nil, env("DATABASE_URL", "postgres://app:s3cr3t@db:5432/patch?sslmode=require")); err != nil {
		t.Fatal(err)
	}
	eff := fmt.Sprint(s.Effective()...)
	if strings.Contains(eff, "s3cr3t") || !strings.Contains(eff, "db:5432") {
		t.Fatalf("effective configuration %q", eff)
	}
	for in, leak := range map[string]string{
		"host=db password=s3cr3t":             "s3cr3t",
		"postgres://db/patch?password=s3cr3t": "s3cr3t",
	} {
		if got := settings.RedactURL(in); strings.Contains(got, leak) {
			t.Errorf("RedactURL(%q) = %q", in, got)
		}
	}
}

func TestHelpAndStrayArguments(t *testing.T) {
	var c conf
	if err := newSet(&c).Parse([]string{"-h"}, env()); !errors.Is(err, settings.ErrHelp) {
		t.Fatalf("-h gave %v", err)
	}
	if err := newSet(&c).Parse([]string{"extra"}, env()); err == nil {
		t.Fatal("a stray argument was accepted")
	}
}

// PrintMarkdown writes a row per setting: flag, variable, default as code
// (or as ShowDefault says, or "(none)"), the usage as Markdown with its
// pipes escaped.
func TestPrintMarkdown(t *testing.T) {
	var c conf
	var url string
	s := newSet(&c)
	s.String(&url, "APP_URL", "url", "", "where to go: `http://host` | `https://host`", nil)
	s.ShowDefault("url", "(required)")
	var buf bytes.Buffer
	s.PrintMarkdown(&buf)
	want := "| flag | environment | default | meaning |\n|---|---|---|---|\n" +
		"| `-name` | `APP_NAME` | `def` | a name |\n" +
		"| `-n` | `APP_N` | `4` | a count |\n" +
		"| `-wait` | `APP_WAIT` | `1s` | a wait |\n" +
		"| `-on` | `APP_ON` | `false` | a switch |\n" +
		"| `-password` | `APP_PASSWORD` | (none) | a password |\n" +
		"| `-url` | `APP_URL` | (required) | where to go: `http://host` \\| `https://host` |\n"
	if buf.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

// PrintUsage aligns flag, variable and default, and wraps the usage below
// them without the Markdown backquotes.
func TestPrintUsageIsPlainAndWrapped(t *testing.T) {
	var long string
	s := settings.New("t")
	s.String(&long, "APP_LONG_SETTING", "long-setting", "x", strings.Repeat("`word` ", 40), nil)
	s.ShowDefault("long-setting", "`APP_NAME` + `.x`")
	var d time.Duration
	s.Duration(&d, "APP_DAY", "day", 24*time.Hour, 0, "a day")
	var buf bytes.Buffer
	s.PrintUsage(&buf)
	out := buf.String()
	if strings.Contains(out, "`") {
		t.Errorf("backquotes in the plain usage:\n%s", out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for _, l := range lines {
		if len(l) > 80 {
			t.Errorf("line of %d characters: %q", len(l), l)
		}
	}
	if len(lines) < 6 {
		t.Fatalf("%d lines: want a header, two rows and the long usage wrapped:\n%s", len(lines), out)
	}
	col := strings.Index(lines[0], "ENVIRONMENT")
	for _, l := range []string{lines[2], lines[len(lines)-2]} {
		if !strings.HasPrefix(l, "-") || strings.Index(l, "APP_") != col {
			t.Errorf("row %q: variable not in the ENVIRONMENT column (%d)", l, col)
		}
	}
	if !strings.Contains(lines[2], "APP_NAME + .x") || !strings.HasSuffix(lines[len(lines)-2], " 24h") {
		t.Errorf("defaults not shown as set:\n%s", out)
	}
	if got := strings.Count(out, "word"); got != 40 {
		t.Errorf("%d of 40 words of the usage printed:\n%s", got, out)
	}
	if !strings.HasPrefix(lines[3], "    word word") || !strings.HasPrefix(lines[4], "    word") {
		t.Errorf("usage not wrapped below its row:\n%s", out)
	}
}

// A secret URL's check runs on the value from the environment and from the
// flag alike, and the error shows the value redacted.
func TestSecretURLCheckAndItsErrors(t *testing.T) {
	const password = "Jq4vTzWk"
	bad := "postgres://app:" + password + "@db:54x2/patch"
	check := func(v string) error {
		if strings.Contains(v, "54x2") {
			return errors.New("bad port")
		}
		return nil
	}
	for _, c := range []struct {
		args []string
		env  []string
	}{
		{nil, []string{"DATABASE_URL", bad}},
		{[]string{"-database-url", bad}, nil},
		{[]string{"-database-url=" + bad}, nil},
		{[]string{"--database-url", bad}, nil},
	} {
		var u string
		s := settings.New("t")
		s.SecretURL(&u, "DATABASE_URL", "database-url", "database", check)
		err := s.Parse(c.args, env(c.env...))
		var se *settings.Error
		if !errors.As(err, &se) || se.Env != "DATABASE_URL" || !strings.Contains(err.Error(), "bad port") {
			t.Errorf("args %v env %v: %v, want DATABASE_URL's bad port", c.args, c.env, err)
			continue
		}
		if strings.Contains(err.Error(), password) || se.Value != "postgres://app:xxxxx@db:54x2/patch" {
			t.Errorf("args %v env %v: %v", c.args, c.env, err)
		}
	}
}

// The flag package's own messages quote arguments whole: a mistyped flag
// or a stray argument carrying a secret is reported without it.
func TestFlagErrorsDoNotQuoteSecrets(t *testing.T) {
	const password = "Rm8bYxQe"
	for _, args := range [][]string{
		{"---database-url=postgres://app:" + password + "@db/patch"},
		{"postgres://app:" + password + "@db/patch"},
		{"host=db", "password=" + password},
		{"-password", "two words", password}, // a secret's value that missed its quotes
	} {
		var c conf
		s := newSet(&c)
		var u string
		s.SecretURL(&u, "DATABASE_URL", "database-url", "database", nil)
		err := s.Parse(args, env())
		if err == nil {
			t.Errorf("args %v accepted", args)
			continue
		}
		if strings.Contains(err.Error(), password) {
			t.Errorf("args %v: %v", args, err)
		}
	}
	var c conf
	if err := newSet(&c).Parse([]string{"extra"}, env()); err == nil || !strings.Contains(err.Error(), `"extra"`) {
		t.Errorf("a plain stray argument is named: %v", err)
	}
}

// ShowWith shows a setting through its function wherever settings are
// printed: in the effective configuration and in its errors.
func TestShowWith(t *testing.T) {
	var v string
	s := settings.New("t")
	s.String(&v, "APP_HOSTS", "hosts", "", "hosts", nil)
	s.ShowWith("hosts", func(string) string { return "shown" })
	if err := s.Parse(nil, env("APP_HOSTS", "user:pw@h:1")); err != nil {
		t.Fatal(err)
	}
	if eff := fmt.Sprint(s.Effective()...); eff != "APP_HOSTSshown" {
		t.Errorf("effective %q", eff)
	}
	if err := s.Invalid("hosts", errors.New("no")); err.Value != "shown" {
		t.Errorf("error %v", err)
	}
}

// Envs lists every setting's variable, in order.
func TestEnvsListsEverySetting(t *testing.T) {
	s := settings.New("t")
	var a, b string
	var n int
	s.String(&a, "A_SETTING", "a", "x", "", nil)
	s.Int(&n, "N_SETTING", "n", 1, 0, "")
	s.Secret(&b, "B_SECRET", "b", "")
	if got := strings.Join(s.Envs(), " "); got != "A_SETTING N_SETTING B_SECRET" {
		t.Fatalf("Envs() = %q", got)
	}
}
