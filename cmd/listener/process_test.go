package main_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// listenerProcess is the listener binary running on the embedded broker
// with the simulated handler, its stderr collected line by line.
type listenerProcess struct {
	t        *testing.T
	cmd      *exec.Cmd
	HTTPAddr string

	mu      sync.Mutex
	lines   []string
	changed chan struct{} // closed and replaced when a line arrives or stderr ends
	eof     bool

	exited chan struct{} // closed once the process has exited; err is set then
	err    error
}

// startListener runs bin with text logs, the embedded broker, the simulated
// handler, an HTTP address of its own and env on top.
func startListener(t *testing.T, bin string, env ...string) *listenerProcess {
	t.Helper()
	return startCommand(t, []string{bin, "-log-format", "text"}, env...)
}

// startCommand is startListener for the command line argv (the listener's
// binary, its flags, or a shell that runs it).
func startCommand(t *testing.T, argv []string, env ...string) *listenerProcess {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &listenerProcess{t: t, HTTPAddr: ln.Addr().String(), changed: make(chan struct{}), exited: make(chan struct{})}
	ln.Close()
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "KAFKA_BROKERS=embedded", "LISTENER_HANDLER=simulated",
		"LISTENER_HTTP_ADDR=" + p.HTTPAddr}, env...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			close(p.changed)
			p.changed = make(chan struct{})
			p.mu.Unlock()
		}
		p.mu.Lock()
		p.eof = true
		close(p.changed)
		p.mu.Unlock()
		p.err = p.cmd.Wait() // only once stderr is read to its end
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// WaitLine waits up to within for a log line containing what, and returns it.
func (p *listenerProcess) WaitLine(what string, within time.Duration) string {
	p.t.Helper()
	deadline := time.After(within)
	for seen := 0; ; {
		p.mu.Lock()
		for ; seen < len(p.lines); seen++ {
			if strings.Contains(p.lines[seen], what) {
				l := p.lines[seen]
				p.mu.Unlock()
				return l
			}
		}
		changed, eof := p.changed, p.eof
		p.mu.Unlock()
		if eof {
			p.t.Fatalf("listener exited before logging %q:\n%s", what, p.Logs())
		}
		select {
		case <-changed:
		case <-deadline:
			p.t.Fatalf("no %q within %v:\n%s", what, within, p.Logs())
		}
	}
}

// Logs returns what the listener logged so far.
func (p *listenerProcess) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// Signal sends s to the listener.
func (p *listenerProcess) Signal(s os.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(s); err != nil {
		p.t.Fatal(err)
	}
}

// WaitExit waits up to within for the listener to exit and returns its
// exit code (-1 when a signal killed it).
func (p *listenerProcess) WaitExit(within time.Duration) int {
	p.t.Helper()
	select {
	case <-p.exited:
	case <-time.After(within):
		p.t.Fatalf("listener still running %v later:\n%s", within, p.Logs())
	}
	var exit *exec.ExitError
	switch {
	case p.err == nil:
		return 0
	case errors.As(p.err, &exit):
		return exit.ExitCode()
	default:
		p.t.Fatalf("wait: %v", p.err)
		return 0
	}
}

var brokersField = regexp.MustCompile(`brokers=(\S+)`) // comma-separated

// Produce writes n records, each with a key of its own, to the embedded
// broker's topic once the listener has claimed its partitions.
func (p *listenerProcess) Produce(n int) {
	p.t.Helper()
	m := brokersField.FindStringSubmatch(p.WaitLine("embedded Kafka broker started", 20*time.Second))
	if m == nil {
		p.t.Fatal("no broker address in the log")
	}
	p.WaitLine("claim started", 20*time.Second)
	cfg := sarama.NewConfig()
	cfg.Producer.Return.Successes = true
	producer, err := sarama.NewSyncProducer(strings.Split(m[1], ","), cfg)
	if err != nil {
		p.t.Fatal(err)
	}
	defer producer.Close()
	for i := range n {
		if _, _, err := producer.SendMessage(&sarama.ProducerMessage{Topic: "platform.inventory.events",
			Key: sarama.StringEncoder(fmt.Sprint("host-", i)), Value: sarama.StringEncoder("event")}); err != nil {
			p.t.Fatal(err)
		}
	}
}

// InFlight returns the records in flight, from /status.json.
func (p *listenerProcess) InFlight() int64 {
	p.t.Helper()
	resp, err := http.Get("http://" + p.HTTPAddr + "/status.json")
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Totals struct {
			InFlight int64 `json:"in_flight"`
		} `json:"totals"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		p.t.Fatal(err)
	}
	return st.Totals.InFlight
}

// WaitInFlight waits up to 20 s until n records are in flight.
func (p *listenerProcess) WaitInFlight(n int64) {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for p.InFlight() != n {
		if time.Now().After(deadline) {
			p.t.Fatalf("%d records in flight 20s on, want %d", p.InFlight(), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitReady waits up to 20 s for /readyz to answer 200.
func waitReady(t *testing.T, p *listenerProcess) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + p.HTTPAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready 20 s on (%v):\n%s", err, p.Logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
