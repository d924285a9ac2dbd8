package main_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildListener compiles this command once per test run.
func buildListener(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "listener")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

func TestBadConfigurationExitsWithCode2(t *testing.T) {
	bin := buildListener(t)
	cases := []struct {
		env  []string
		want string
	}{
		{nil, "KAFKA_BROKERS"},
		{[]string{"KAFKA_BROKERS=embedded", "LISTENER_INFLIGHT_TOTAL=0"}, "LISTENER_INFLIGHT_TOTAL"},
		{[]string{"KAFKA_BROKERS=embedded", "LISTENER_ORDERING=random"}, "LISTENER_ORDERING"},
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

// The listener joins its group on the embedded broker, serves its status
// page without secrets and, on SIGTERM, drains, leaves and exits 0.
func TestSIGTERMDrainsAndExitsZero(t *testing.T) {
	bin := buildListener(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	const secret = "s3cr3t-pa55"
	cmd := exec.Command(bin, "-log-format", "text")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "KAFKA_BROKERS=embedded", "EMBEDDED_PARTITIONS=2", "LISTENER_HANDLER=simulated",
		"LISTENER_HTTP_ADDR=" + addr, "DATABASE_URL=postgres://patch:" + secret + "@db.example:5432/patch", "KAFKA_SASL_PASSWORD=" + secret}
	var logs strings.Builder
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 256)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs.WriteString(sc.Text() + "\n")
			lines <- sc.Text()
		}
		close(lines)
	}()
	waitLine := func(what string) {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("listener exited before logging %q", what)
				}
				if strings.Contains(l, what) {
					return
				}
			case <-deadline:
				_ = cmd.Process.Kill()
				t.Fatalf("no %q within 20s", what)
			}
		}
	}
	waitLine("claim started")
	resp, err := http.Get("http://" + addr + "/status")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), "DATABASE_URL") || !strings.Contains(string(page), "db.example") || strings.Contains(string(page), secret) {
		t.Fatalf("status page must show the settings without the secret:\n%s", page)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitLine("listener stopped")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit: %v, want 0", err)
		}
		for range lines { // the reader has seen everything once the pipe is closed
		}
		if strings.Contains(logs.String(), secret) || !strings.Contains(logs.String(), "DATABASE_URL") {
			t.Fatalf("logs must show the configuration without secrets:\n%s", logs.String())
		}
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("listener did not exit after SIGTERM")
	}
}
