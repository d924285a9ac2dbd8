package main_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// probeTimeout is the kubelet's timeoutSeconds in deploy/kubernetes.
const probeTimeout = 2 * time.Second

// probe asks path on a connection of its own, as the kubelet does, failing
// the test when no answer comes within probeTimeout.
func probe(t *testing.T, addr, path string) int {
	t.Helper()
	c := &http.Client{Timeout: probeTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// descriptors counts the file descriptors process pid holds open.
func descriptors(t *testing.T, pid int) int {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Skipf("cannot count descriptors here: %v", err)
	}
	return len(fds)
}

// rss is process pid's resident memory, as /proc reports it.
func rss(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if m := regexp.MustCompile(`VmRSS:\s+(\d+ kB)`).FindSubmatch(b); m != nil {
		return string(m[1])
	}
	return "?"
}

// floodIdle opens n connections to addr and leaves them idle: every other
// one asks nothing at all, the rest ask /healthz once and keep the
// connection alive.
func floodIdle(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for i := range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
		if i%2 == 1 {
			fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		}
	}
	return conns
}

// Many idle keep-alive connections to the HTTP port, far more than its cap
// (18,000 once held 18,021 descriptors and 447 MiB): the listener holds at
// most the cap's worth, and its probes answer within the kubelet's timeout
// through the flood.
func TestAnIdleFloodLeavesTheProbesAnsweringAndTheDescriptorsBounded(t *testing.T) {
	bin := buildProvingListener(t)
	const maxConns, flood, slack = 16, 1000, 8
	p := startListener(t, bin, fmt.Sprintf("LISTENER_HTTP_MAX_CONNS=%d", maxConns))
	waitReady(t, p)
	pid := p.cmd.Process.Pid
	before, rssBefore := descriptors(t, pid), rss(pid)
	floodIdle(t, p.HTTPAddr, flood)
	for _, path := range []string{"/healthz", "/readyz"} {
		if code := probe(t, p.HTTPAddr, path); code != http.StatusOK {
			t.Errorf("%s answered %d through a flood of %d idle connections, want 200", path, code, flood)
		}
	}
	// The probes' connections came after the flood's, in one queue: every
	// connection of the flood has been accepted by now.
	after := descriptors(t, pid)
	t.Logf("%d idle connections: %d descriptors before, %d after; RSS %s before, %s after", flood, before, after, rssBefore, rss(pid))
	if after > before+maxConns+slack {
		t.Errorf("the listener holds %d descriptors after %d idle connections, %d before: want at most the cap (%d) and %d more",
			after, flood, before, maxConns, slack)
	}
}

// waitClosed reads r (of c) until the server closes c, and logs how long
// that took from start; it fails the test when c is still open within.
func waitClosed(t *testing.T, what string, c net.Conn, r io.Reader, start time.Time, within time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(start.Add(within))
	_, err := io.Copy(io.Discard, r)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("%s: the connection is still open %v on", what, within)
		return
	}
	t.Logf("%s: closed by the listener after %v", what, time.Since(start).Round(10*time.Millisecond))
}

// Clients too slow to hold a connection for long: a body sent a byte at a
// time (one held its connection 31 s and counting when only the header
// was timed) is cut off by the read timeout, a kept-alive connection left
// unused by the idle timeout, and a header over the bound answered 431.
func TestSlowAndOversizedRequestsAreCutOff(t *testing.T) {
	bin := buildProvingListener(t)
	const timeout, within = time.Second, 15 * time.Second
	p := startListener(t, bin, "LISTENER_HTTP_READ_TIMEOUT="+timeout.String(), "LISTENER_HTTP_IDLE_TIMEOUT="+timeout.String())
	waitReady(t, p)

	var wg sync.WaitGroup
	wg.Go(func() {
		c, err := net.Dial("tcp", p.HTTPAddr)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		start := time.Now()
		fmt.Fprintf(c, "POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
		go func() { // a byte every 200 ms, until the server has closed
			for {
				time.Sleep(200 * time.Millisecond)
				if _, err := c.Write([]byte("x")); err != nil {
					return
				}
			}
		}()
		waitClosed(t, "a body sent a byte per 200 ms (read timeout "+timeout.String()+")", c, c, start, within)
	})
	wg.Go(func() {
		c, err := net.Dial("tcp", p.HTTPAddr)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Error(err)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		waitClosed(t, "a kept-alive connection left unused (idle timeout "+timeout.String()+")", c, br, time.Now(), within)
	})
	wg.Go(func() {
		req, _ := http.NewRequest(http.MethodGet, "http://"+p.HTTPAddr+"/healthz", nil)
		req.Header.Set("X-Padding", strings.Repeat("a", 64<<10))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("a header of 64 KiB answered %d, want 431", resp.StatusCode)
		}
	})
	wg.Wait()
}

// Server errors are log records: an accept failing with the process out of
// descriptors (once a raw "http: Accept error" line on stderr) is a warning
// record, and a few of them, not one line per retry.
func TestAcceptErrorsAreLogRecords(t *testing.T) {
	bin := buildProvingListener(t)
	// A descriptor limit just above what the listener needs to start, and
	// no cap of its own to stop the flood before it runs out.
	const limit, flood = 128, 300
	p := startCommand(t, []string{"/bin/sh", "-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, limit), bin, "-log-format", "text"},
		"LISTENER_HTTP_MAX_CONNS=100000")
	waitReady(t, p)
	start := time.Now()
	floodIdle(t, p.HTTPAddr, flood)
	p.WaitLine("Accept error", 20*time.Second)
	var records int
	for _, l := range strings.Split(p.Logs(), "\n") {
		if !strings.Contains(l, "Accept error") {
			continue
		}
		if !strings.HasPrefix(l, "time=") || !strings.Contains(l, "level=WARN") || !strings.Contains(l, `msg="HTTP server error"`) {
			t.Errorf("not a warning record of the listener's log: %q", l)
		}
		records++
	}
	// The server retries every second at most; its log passes five
	// records at once, then one per 10 s.
	if most := 5 + int(time.Since(start)/(10*time.Second)) + 1; records > most {
		t.Errorf("%d records of failed accepts in %v, want at most %d", records, time.Since(start), most)
	}
	t.Logf("%d records of failed accepts in %v", records, time.Since(start).Round(time.Millisecond))
}
