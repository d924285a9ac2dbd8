package main_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildListener compiles this command (the production build) into the
// test's temporary directory.
func buildListener(t *testing.T) string {
	t.Helper()
	return build(t, ".", "listener")
}

// buildProvingListener compiles cmd/listener-proving: the same runtime with
// the in-process broker and the simulated handler, for the tests that run
// the process end to end without a real broker.
func buildProvingListener(t *testing.T) string {
	t.Helper()
	return build(t, "../listener-proving", "listener-proving")
}

func build(t *testing.T, pkg, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// The production build refuses what only the proving ground's build has,
// naming the setting and the build that has it.
func TestProductionBuildRefusesTheProvingGroundsSettings(t *testing.T) {
	bin := buildListener(t)
	for _, c := range []struct {
		env        []string
		want, also string
	}{
		{[]string{"KAFKA_BROKERS=embedded"}, "KAFKA_BROKERS", "listener-proving"},
		{[]string{"KAFKA_BROKERS=127.0.0.1:1", "LISTENER_HANDLER=simulated"}, "LISTENER_HANDLER", "evaluate"},
	} {
		code, _, stderr := runListener(t, bin, c.env)
		if code != 2 || !strings.Contains(stderr, c.want) || !strings.Contains(stderr, c.also) {
			t.Errorf("env %v: exit code %d, want 2 with a message naming %s and %s:\n%s", c.env, code, c.want, c.also, stderr)
		}
	}
}

func TestBadConfigurationExitsWithCode2(t *testing.T) {
	bin := buildListener(t)
	cases := []struct {
		env  []string
		want string
	}{
		{nil, "KAFKA_BROKERS"},
		{[]string{"KAFKA_BROKERS=127.0.0.1:1", "LISTENER_INFLIGHT_TOTAL=0"}, "LISTENER_INFLIGHT_TOTAL"},
		{[]string{"KAFKA_BROKERS=127.0.0.1:1", "LISTENER_ORDERING=random"}, "LISTENER_ORDERING"},
	}
	for _, c := range cases {
		cmd := exec.Command(bin)
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, c.env...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Errorf("env %v: %v, want exit code 2", c.env, err)
		}
		if !strings.Contains(stderr.String(), c.want) {
			t.Errorf("env %v: message %q does not name %s", c.env, stderr.String(), c.want)
		}
	}
}

// runListener runs bin with only env (and PATH) and args, and returns its
// exit code and everything it wrote to stdout and stderr.
func runListener(t *testing.T, bin string, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}

// showsPassword returns what of password output shows: all of it, or a
// piece of 4 bytes with a letter in it (not a port, not an escape).
func showsPassword(output, password string) string {
	if strings.Contains(output, password) {
		return password
	}
	for i := 0; i+4 <= len(password); i++ {
		p := password[i : i+4]
		if strings.ContainsAny(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") && strings.Contains(output, p) {
			return p
		}
	}
	return ""
}

// A malformed DATABASE_URL, given as the variable or as the flag, is a
// settings error: exit code 2, a message naming DATABASE_URL, and the
// password nowhere in what the listener writes.
func TestMalformedDatabaseURLExitsWithCode2WithoutThePassword(t *testing.T) {
	bin := buildListener(t)
	cases := []struct {
		name, url, password string
	}{
		{"bad port", "postgres://patchflow:Jq4vTzWk@db.example:54x2/patchflow", "Jq4vTzWk"},
		{"port out of range", "postgres://patchflow:Rm8bYxQe@db.example:99999/patchflow", "Rm8bYxQe"},
		{"missing host", "postgres://patchflow:Hd2nLcVu@/patchflow", "Hd2nLcVu"},
		{"bad scheme", "mysql://patchflow:Gt5pKsXa@db.example:3306/patchflow", "Gt5pKsXa"},
		{"not a URL", "patchflow:Bw3mZrYo@db.example:5432/patchflow", "Bw3mZrYo"},
		{"unparsable escape in the password", "postgres://patchflow:Nf6h%zzQjLd@db.example/patchflow", "Nf6h%zzQjLd"},
		{"unparsable escape in the database", "postgres://patchflow:Cv9kPxTs@db.example/patch%zzflow", "Cv9kPxTs"},
		{"key=value with a bad value", "host=db.example port=fivefour user=patchflow password=Ok8cMzRb", "Ok8cMzRb"},
		{"key=value with an unquoted space", "host=db.example user=patchflow password=Uh5yG nXeQ dbname=patchflow", "Uh5yG nXeQ"},
		{"special characters unescaped", "postgres://patchflow:Wy2r/Dm?Fq#Zx@db.example:5432/patchflow", "Wy2r/Dm?Fq#Zx"},
		{"special characters unescaped, parsing as another host", "postgres://patchflow:1234/Lz7gHbNc@db.example/patchflow", "1234/Lz7gHbNc"},
		{"an '@' in the password", "postgres://patchflow:Ts4j@VwKp@db.example:54x2/patchflow", "Ts4j@VwKp"},
	}
	base := []string{"KAFKA_BROKERS=127.0.0.1:1", "LISTENER_HANDLER=evaluate", "VMAAS_URL=http://127.0.0.1:1", "LISTENER_HTTP_ADDR="}
	for _, c := range cases {
		for _, how := range []string{"env", "flag"} {
			env, args := base, []string(nil)
			if how == "env" {
				env = append(slices.Clone(base), "DATABASE_URL="+c.url)
			} else {
				args = []string{"-database-url", c.url}
			}
			code, stdout, stderr := runListener(t, bin, env, args...)
			if code != 2 {
				t.Errorf("%s (%s): exit code %d, want 2\n%s", c.name, how, code, stderr)
			}
			if !strings.Contains(stderr, "DATABASE_URL") {
				t.Errorf("%s (%s): the message does not name DATABASE_URL: %s", c.name, how, stderr)
			}
			if shown := showsPassword(stdout+stderr, c.password); shown != "" {
				t.Errorf("%s (%s): the output shows %q of the password:\n%s%s", c.name, how, shown, stdout, stderr)
			}
		}
	}
}

// A well-formed DATABASE_URL to a port where nothing listens: the listener
// fails to start (exit code 1) and says why, without the password.
func TestDatabaseConnectErrorShowsNoPassword(t *testing.T) {
	bin := buildListener(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	const password = "p@ss/w0rd Kx9vQ"
	for _, dsn := range []string{
		"postgres://patchflow:" + url.PathEscape(password) + "@" + closed + "/patchflow?sslmode=disable",
		"postgres://patchflow@" + closed + "/patchflow?sslmode=disable&password=" + url.QueryEscape(password),
		"host=127.0.0.1 port=" + closed[strings.LastIndex(closed, ":")+1:] + " user=patchflow password='" + password + "' sslmode=disable",
	} {
		code, stdout, stderr := runListener(t, bin, []string{"KAFKA_BROKERS=127.0.0.1:1", "LISTENER_HANDLER=evaluate",
			"VMAAS_URL=http://127.0.0.1:1", "LISTENER_HTTP_ADDR=", "LOG_FORMAT=text", "DATABASE_URL=" + dsn})
		if code != 1 || !strings.Contains(stderr, "listener failed to start") || !strings.Contains(stderr, "connection refused") {
			t.Errorf("exit code %d, want 1 with the connection refused:\n%s", code, stderr)
		}
		out := stdout + stderr
		for _, form := range []string{password, url.PathEscape(password), url.QueryEscape(password), "Kx9vQ", "p@ss"} {
			if strings.Contains(out, form) {
				t.Errorf("the output shows %q:\n%s", form, out)
			}
		}
	}
}

// The listener joins its group on the embedded broker, serves its status
// page without secrets and, on SIGTERM, drains, leaves and exits 0.
func TestSIGTERMDrainsAndExitsZero(t *testing.T) {
	bin := buildProvingListener(t)
	const secret = "s3cr3t-pa55"
	p := startListener(t, bin, "EMBEDDED_PARTITIONS=2",
		"DATABASE_URL=postgres://patch:"+secret+"@db.example:5432/patch", "KAFKA_SASL_PASSWORD="+secret)
	p.WaitLine("claim started", 20*time.Second)
	resp, err := http.Get("http://" + p.HTTPAddr + "/status")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), "DATABASE_URL") || !strings.Contains(string(page), "db.example") || strings.Contains(string(page), secret) {
		t.Fatalf("status page must show the settings without the secret:\n%s", page)
	}
	p.Signal(syscall.SIGTERM)
	if code := p.WaitExit(20 * time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0:\n%s", code, p.Logs())
	}
	logs := p.Logs()
	if !strings.Contains(logs, "consumer stopped") {
		t.Fatalf("exited without draining:\n%s", logs)
	}
	if strings.Contains(logs, secret) || !strings.Contains(logs, "DATABASE_URL") {
		t.Fatalf("logs must show the configuration without secrets:\n%s", logs)
	}
}
