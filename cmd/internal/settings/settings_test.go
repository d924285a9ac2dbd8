package settings_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/patchflow/patchflow/cmd/internal/settings"
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
	s.SecretURL(&u, "DATABASE_URL", "database-url", "database")
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
