package main_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildListener compiles this command into the test's temporary directory.
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
	if !strings.Contains(logs, "listener stopped") {
		t.Fatalf("exited without draining:\n%s", logs)
	}
	if strings.Contains(logs, secret) || !strings.Contains(logs, "DATABASE_URL") {
		t.Fatalf("logs must show the configuration without secrets:\n%s", logs)
	}
}
