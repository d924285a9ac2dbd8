package redact_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/patchflow/patchflow/internal/redact"
)

func TestURL(t *testing.T) {
	for in, want := range map[string]string{
		"": "",
		"postgres://patch:s3cr3t@db:5432/patch?sslmode=require": "postgres://patch:xxxxx@db:5432/patch?sslmode=require",
		"postgres://patch@db/patch":                             "postgres://patch@db/patch",
		"http://vmaas:8000/api":                                 "http://vmaas:8000/api",
		// a password that ends the user info early, or has an '@' of its own
		"postgres://u:pa/ss@db/patch":   "postgres://u:xxxxx@db/patch",
		"postgres://u:12/ss@db/patch":   "postgres://u:xxxxx@db/patch",
		"postgres://u:p?s#s@db/patch":   "postgres://u:xxxxx@db/patch",
		"postgres://u:p@ss@db/patch":    "postgres://u:xxxxx@db/patch",
		"postgres://u:p%zzss@db:x/p":    "postgres://u:xxxxx@db:x/p",
		"postgres://u:a:b@db/patch":     "postgres://u:xxxxx@db/patch",
		"postgres://u:@db/patch":        "postgres://u:@db/patch",
		"http://user:tok@vmaas/?token=": "http://user:xxxxx@vmaas/?token=",
		// secret query values, with '&', '#' or '@' of their own
		"postgres://db/patch?password=s3cr3t&sslmode=disable":  "postgres://db/patch?password=xxxxx&sslmode=disable",
		"postgres://db/patch?sslmode=disable&password=a&b#c":   "postgres://db/patch?sslmode=disable&password=xxxxx",
		"postgres://db/patch?password=a@b":                     "postgres://db/patch?password=xxxxx",
		"http://v/x?api_key=k1&Token=t2&access_token=t3&page=": "http://v/x?api_key=xxxxx&Token=xxxxx&access_token=xxxxx&page=",
		"postgres://db/p?sslkey=/k.pem&sslcert=/c.pem":         "postgres://db/p?sslkey=/k.pem&sslcert=/c.pem",
		// key=value strings
		"host=db password=s3cr3t dbname=patch":       "host=db password=xxxxx dbname=patch",
		`host=db password='se cr\'et' dbname=patch`:  "host=db password='xxxxx' dbname=patch",
		"host=db password=se cret dbname=patch":      "host=db password=xxxxx dbname=patch",
		"host=db password = spaced  sslmode=require": "host=db password = xxxxx  sslmode=require",
		"host=db password='unterminated sslmode=x":   "host=db password='xxxxx",
		`host=db password=a\ b user=x`:               "host=db password=xxxxx user=x",
		"host=db sslpassword=k user=x":               "host=db sslpassword=xxxxx user=x",
		"host=db port=5432":                          "host=db port=5432",
		// neither
		"db.example:5432":            redact.Hidden,
		"patch:s3cr3t@db.example/db": redact.Hidden,
	} {
		if got := redact.URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}

// The query of a URL without user info may carry an '@': the password is
// then taken to run to it (more hidden than needed, never less).
func TestURLHidesTooMuchRatherThanTooLittle(t *testing.T) {
	got := redact.URL("postgres://db:5432/patch?application_name=a@b")
	if strings.Contains(got, "application_name=a") || !strings.HasPrefix(got, "postgres://db:") {
		t.Fatalf("got %q", got)
	}
}

// Secrets finds a password in each form an error text may quote it.
func TestSecretsAndText(t *testing.T) {
	const password = `s3cr@t/pa ss"q`
	for _, dsn := range []string{
		"postgres://patch:" + url.PathEscape(password) + "@db.example:5432/patch",
		"postgres://patch:" + url.QueryEscape(password) + "@db.example:5432/patch",
		"postgres://patch:" + password + "@db.example:5432/patch", // unescaped: not a valid URL
		"postgres://db.example/patch?password=" + url.QueryEscape(password),
		`host=db.example user=patch password='s3cr@t/pa ss"q' dbname=patch`,
	} {
		secrets := redact.Secrets(dsn)
		for _, leak := range []string{
			fmt.Sprintf("parse %q: invalid port", dsn),
			"connecting to " + dsn + ": refused",
			fmt.Sprintf("password %q rejected", password),
			"wrapped: " + url.QueryEscape(password),
			"wrapped: " + url.PathEscape(password),
			"user info: " + url.UserPassword("patch", password).String(),
		} {
			got := redact.Text(leak, secrets)
			for _, form := range []string{password, url.QueryEscape(password), url.PathEscape(password), "s3cr@t", "pa ss", "pa+ss", "pa%20ss"} {
				if strings.Contains(got, form) {
					t.Errorf("%s: %q shows %q", dsn, got, form)
				}
			}
			if !strings.Contains(got, redact.Mask) {
				t.Errorf("%s: %q lost the place of the password", dsn, got)
			}
		}
	}
	if s := redact.Secrets("postgres://patch@db/patch"); len(s) != 0 {
		t.Errorf("a URL without a password has secrets %q", s)
	}
	if s := redact.Secrets("db.example:5432"); !slices.Contains(s, "db.example:5432") {
		t.Errorf("a value shown as %s must be a secret whole, got %q", redact.Hidden, s)
	}
}

func TestErrorKeepsTheChain(t *testing.T) {
	secrets := redact.Secrets("postgres://patch:pw-42@db/patch")
	err := redact.Error(fmt.Errorf("dial postgres://patch:pw-42@db/patch: %w", context.DeadlineExceeded), secrets)
	if strings.Contains(err.Error(), "pw-42") || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v (is deadline: %v)", err, errors.Is(err, context.DeadlineExceeded))
	}
	plain := fmt.Errorf("ping: %w", context.Canceled)
	if got := redact.Error(plain, secrets); got != plain {
		t.Fatalf("an error without the password came back as %v, want itself", got)
	}
	if redact.Error(nil, secrets) != nil {
		t.Fatal("nil became an error")
	}
}

// Check describes a bad value from its redacted form: by the check's own
// error when that form is bad too, by ErrInSecret when only the secret is.
func TestCheck(t *testing.T) {
	noPort := func(v string) error {
		if strings.Contains(v, ":bad") {
			return fmt.Errorf("value %q: bad port", v)
		}
		if strings.Contains(v, "%zz") {
			return fmt.Errorf("value %q: bad escape", v)
		}
		return nil
	}
	cases := []struct {
		in, want string
	}{
		{"postgres://u:pw-1@db:5432/x", ""},
		{"postgres://u:pw-1@db:bad/x", `value "postgres://u:xxxxx@db:bad/x": bad port`},
		{"postgres://u:pw-%zz@db:5432/x", redact.ErrInSecret.Error()},
		{"postgres://u@db:bad/x", `value "postgres://u@db:bad/x": bad port`},
	}
	for _, c := range cases {
		err := redact.Check(c.in, noPort)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("Check(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// Whatever the password, as written into a URL or a key=value string,
// neither URL nor an error text passed through Text and Check shows it.
func TestNoFormOfAPasswordShows(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		// Q and Z mark the password's ends; neither occurs elsewhere.
		pw := "Q" + rapid.StringOfN(rapid.SampledFrom([]rune(`abc019 @:/?#%&='"\+-.`)), 0, 12, -1).Draw(t, "password") + "Z"
		quoted := strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(pw)
		dsn := rapid.SampledFrom([]string{
			"postgres://patch:" + pw + "@db.example:5432/patch?sslmode=disable",
			"postgres://patch:" + url.PathEscape(pw) + "@db.example:5432/patch",
			"postgresql://patch:" + url.QueryEscape(pw) + "@db.example/patch",
			"postgres://db.example/patch?sslmode=disable&password=" + pw,
			"postgres://db.example/patch?password=" + url.QueryEscape(pw) + "&sslmode=disable",
			"host=db.example user=patch password='" + quoted + "' dbname=patch",
			"host=db.example password=" + strings.NewReplacer(`\`, `\\`, " ", `\ `).Replace(pw) + " dbname=patch",
			"http://user:" + pw + "@vmaas.example:8000",
		}).Draw(t, "dsn")
		if got := redact.URL(dsn); strings.Contains(got, pw) {
			t.Fatalf("URL(%q) = %q", dsn, got)
		}
		secrets := redact.Secrets(dsn)
		for _, text := range []string{fmt.Sprintf("parse %q: boom", dsn), "at " + dsn, fmt.Sprintf("password %q", pw)} {
			if got := redact.Text(text, secrets); strings.Contains(got, pw) {
				t.Fatalf("Text(%q) = %q", text, got)
			}
		}
		quoting := func(v string) error {
			if strings.Contains(v, "Q") || strings.Contains(v, "db.example") {
				return fmt.Errorf("bad value %q", v)
			}
			return nil
		}
		if err := redact.Check(dsn, quoting); err == nil || strings.Contains(err.Error(), "Q") {
			t.Fatalf("Check(%q) = %v", dsn, err)
		}
	})
}
