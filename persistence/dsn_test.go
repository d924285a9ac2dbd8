package persistence_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/patchflow/patchflow/internal/redact"
	"github.com/patchflow/patchflow/persistence"
)

// CheckURL accepts the connection strings lib/pq takes that name a host,
// and refuses the others with an error that never shows the password.
func TestCheckURL(t *testing.T) {
	for _, ok := range []string{
		"postgres://patch:s3cr3t@db.example:5432/patch?sslmode=verify-full",
		"postgresql://patch@db.example/patch",
		"postgres://patch:p%40ss%2Fw%3Fr%23d@db.example/patch", // special characters percent-encoded
		"postgres:///patch?host=/var/run/postgresql",
		"host=db.example port=5432 user=patch password='se cr\\'et' dbname=patch",
		"host=/var/run/postgresql dbname=patch",
	} {
		if err := persistence.CheckURL(ok); err != nil {
			t.Errorf("CheckURL(%q) = %v, want nil", ok, err)
		}
	}
	cases := []struct {
		dsn, password, want string
	}{
		{"", "", "empty"},
		{"postgres://patch:Jq4vTzWk@db.example:54x2/patch", "Jq4vTzWk", `invalid port ":54x2"`},
		{"postgres://patch:Rm8bYxQe@db.example:99999/patch", "Rm8bYxQe", `"port"`},
		{"postgres://patch:Hd2nLcVu@/patch", "Hd2nLcVu", "no host"},
		{"postgres://patch:Hd2nLcVu@:5432/patch", "Hd2nLcVu", "no host"},
		{"mysql://patch:Gt5pKsXa@db.example/patch", "Gt5pKsXa", `scheme "mysql"`},
		{"POSTGRES://patch:Gt5pKsXa@db.example/patch", "Gt5pKsXa", `scheme "POSTGRES"`},
		{"db.example:5432", "db.example:5432", "neither a postgres:// URL nor a key=value"},
		{"patch:Bw3mZrYo@db.example/patch", "Bw3mZrYo", "neither a postgres:// URL nor a key=value"},
		{"postgres://patch:Nf6h%zzQjLd@db.example/patch", "Nf6h%zzQjLd", redact.ErrInSecret.Error()},
		{"postgres://patch:Cv9kPxTs@db.example/pa%zztch", "Cv9kPxTs", `invalid URL escape "%zz"`},
		{"postgres://patch:Wy2r/Dm?Fq#Zx@db.example:5432/patch", "Wy2r/Dm?Fq#Zx", redact.ErrInSecret.Error()},
		{"postgres://patch:1234/Lz7gHbNc@db.example/patch", "1234/Lz7gHbNc", redact.ErrInSecret.Error()}, // parses, as host "patch:1234"
		{"postgres://patch:Ts4jVwKp@db.example/patch?sslmode=maybe", "Ts4jVwKp", `"sslmode"`},
		{"host=db.example port=five password=Ok8cMzRb", "Ok8cMzRb", `"port"`},
		{"host=db.example password=Uh5yG nXeQ dbname=patch", "Uh5yG nXeQ", redact.ErrInSecret.Error()},
		{"host=db.example password='Ea3qSfWj", "Ea3qSfWj", "unterminated quoted string"},
	}
	for _, c := range cases {
		err := persistence.CheckURL(c.dsn)
		if err == nil {
			t.Errorf("CheckURL(%q) accepted it", c.dsn)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckURL(%q) = %q, want it to say %q", c.dsn, err, c.want)
		}
		if c.password != "" && strings.Contains(err.Error(), c.password) {
			t.Errorf("CheckURL(%q) = %q shows the password", c.dsn, err)
		}
		for _, piece := range pieces(c.password) {
			if strings.Contains(err.Error(), piece) {
				t.Errorf("CheckURL(%q) = %q shows %q of the password", c.dsn, err, piece)
			}
		}
	}
}

// pieces returns the 4-byte pieces of a password, without the ones made of
// digits, '%' and punctuation alone (a port, an escape: they say nothing).
func pieces(password string) []string {
	var out []string
	for i := 0; i+4 <= len(password); i++ {
		p := password[i : i+4]
		if strings.IndexFunc(p, func(r rune) bool { return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' }) >= 0 {
			out = append(out, p)
		}
	}
	return out
}

// Open refuses a malformed URL before lib/pq quotes it, and reports a
// server that is not there without the password.
func TestOpenErrorsNeverShowThePassword(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close() // nothing listens there now
	const password = "Op3n-n3ver-sh0wn"
	port := closed[strings.LastIndex(closed, ":")+1:]
	for _, c := range []struct {
		dsn     string
		refused bool // a connection refused, not a URL refused
	}{
		{"postgres://patch:" + password + "@db.example:54x2/patch", false},
		{"postgres://patch:" + password + "@" + closed + "/patch?sslmode=disable&connect_timeout=2", true},
		{"host=127.0.0.1 port=" + port + " user=patch password=" + password + " sslmode=disable connect_timeout=2", true},
	} {
		_, err := persistence.Open(context.Background(), c.dsn, persistence.DefaultPoolSettings())
		if err == nil {
			t.Fatalf("Open(%q) succeeded", redact.URL(c.dsn))
		}
		if strings.Contains(err.Error(), password) {
			t.Errorf("Open's error shows the password: %v", err)
		}
		var op *net.OpError
		if c.refused && !errors.As(err, &op) {
			t.Errorf("Open's error lost its cause (a *net.OpError): %v", err)
		}
		if !c.refused && !strings.Contains(err.Error(), `invalid port ":54x2"`) {
			t.Errorf("Open's error does not say what is wrong: %v", err)
		}
	}
}
