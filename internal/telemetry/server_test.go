package telemetry

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"pgregory.net/rapid"
)

// probeTimeout is the kubelet's timeoutSeconds in deploy/kubernetes: a
// probe not answered within it counts as failed.
const probeTimeout = 2 * time.Second

// serveTest serves the listener's own handler (with pprof) plus extra on
// 127.0.0.1 within limits.
func serveTest(t *testing.T, limits ServerLimits, extra map[string]http.Handler) (*connLimit, string) {
	t.Helper()
	m, err := NewIn(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/", WithPprof(Handler(m, &Readiness{Bridge: newIdleBridge(t)}, nil)))
	for p, h := range extra {
		mux.Handle(p, h)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl, stop := serve(ln, mux, limits, slog.New(slog.DiscardHandler))
	t.Cleanup(stop)
	return cl, ln.Addr().String()
}

// probe asks path on a connection of its own, as the kubelet does, and
// returns the status, failing the test when no answer comes within
// probeTimeout.
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

// floodIdle opens n connections to addr and leaves them idle: every other
// one asks nothing at all, the rest ask /healthz once and keep the
// connection alive. It returns them, open from the client's side.
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
			// Its answer may never come: the server may close it for a newer
			// one before it asks. Either way it is left idle.
			fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		}
	}
	return conns
}

// closedByServer counts the conns the server has closed: a read that ends
// in EOF (or a reset) within wait, the others being still open.
func closedByServer(conns []net.Conn, wait time.Duration) int {
	var (
		mu     sync.Mutex
		closed int
		wg     sync.WaitGroup
	)
	deadline := time.Now().Add(wait)
	for _, c := range conns {
		wg.Go(func() {
			_ = c.SetReadDeadline(deadline)
			r := bufio.NewReader(c)
			for {
				// An answer to its /healthz may come first; what follows it
				// tells whether the connection is still open.
				if _, err := r.ReadByte(); err != nil {
					if !isTimeout(err) {
						mu.Lock()
						closed++
						mu.Unlock()
					}
					return
				}
			}
		})
	}
	wg.Wait()
	return closed
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Many more idle connections than the cap (the flood of 18,000 that held
// 18,021 descriptors): the server holds no more than the cap, closing the
// idle longest for each new one, and the probes still answer within the
// kubelet's timeout.
func TestAnIdleFloodLeavesTheProbesAnsweringWithTheConnectionsBounded(t *testing.T) {
	const maxConns, flood = 8, 400
	limits := DefaultServerLimits()
	limits.MaxConns = maxConns
	cl, addr := serveTest(t, limits, nil)
	conns := floodIdle(t, addr, flood)
	for _, path := range []string{"/healthz", "/readyz", "/healthz"} {
		if code := probe(t, addr, path); code != http.StatusOK && !(path == "/readyz" && code == http.StatusServiceUnavailable) {
			t.Errorf("%s answered %d under the flood", path, code)
		}
		if n := cl.open(); n > maxConns {
			t.Fatalf("%d connections open, more than the cap of %d", n, maxConns)
		}
	}
	// The probes were accepted after every connection of the flood (one
	// queue): all of them have been counted, and all but the cap's worth
	// closed by the server.
	if got := closedByServer(conns, time.Second); got < flood-maxConns {
		t.Errorf("the server closed %d of the %d idle connections, want at least %d", got, flood, flood-maxConns)
	}
}

// A request being answered is never closed for a new connection. With
// every connection but the probes' share busy in a handler, other requests
// are answered 503 at once, and the probes still answer under a flood.
func TestBusyConnectionsStayAndTheProbesStillAnswer(t *testing.T) {
	const maxConns = 4 // three may run handlers other than the probes'
	entered, release := make(chan struct{}, maxConns), make(chan struct{})
	slow := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		entered <- struct{}{}
		<-release
		fmt.Fprintln(w, "done")
	})
	limits := DefaultServerLimits()
	limits.MaxConns = maxConns
	cl, addr := serveTest(t, limits, map[string]http.Handler{"GET /slow": slow})

	type answer struct {
		code int
		err  error
	}
	answers := make(chan answer, maxConns)
	for range maxConns - maxConns/4 {
		go func() {
			resp, err := http.Get("http://" + addr + "/slow")
			if err != nil {
				answers <- answer{err: err}
				return
			}
			defer resp.Body.Close()
			_, err = io.ReadAll(resp.Body)
			answers <- answer{resp.StatusCode, err}
		}()
		<-entered
	}
	if code := probe(t, addr, "/metrics"); code != http.StatusServiceUnavailable {
		t.Errorf("/metrics answered %d with every other handler busy, want 503 at once", code)
	}
	floodIdle(t, addr, 50)
	for _, path := range []string{"/healthz", "/readyz"} {
		if code := probe(t, addr, path); code != http.StatusOK && code != http.StatusServiceUnavailable {
			t.Errorf("%s answered %d", path, code)
		}
	}
	if n := cl.open(); n > maxConns {
		t.Errorf("%d connections open, more than the cap of %d", n, maxConns)
	}
	close(release)
	for range maxConns - maxConns/4 {
		if a := <-answers; a.err != nil || a.code != http.StatusOK {
			t.Errorf("a request busy in its handler through the flood: %d, %v; want 200", a.code, a.err)
		}
	}
}

// The write deadline is in force (an answer written past it is cut off),
// and pprof's CPU profile, which takes the seconds asked for before it is
// written, still comes whole past it.
func TestWriteTimeoutCutsASlowAnswerButNotAProfile(t *testing.T) {
	const writeTimeout = 300 * time.Millisecond
	late := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(2 * writeTimeout) // the deadline is a point in time: it has passed
		_, _ = w.Write(bytes.Repeat([]byte("x"), 1<<20))
	})
	limits := DefaultServerLimits()
	limits.WriteTimeout = writeTimeout
	_, addr := serveTest(t, limits, map[string]http.Handler{"GET /late": late})

	if resp, err := http.Get("http://" + addr + "/late"); err == nil {
		n, rerr := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if rerr == nil && n == 1<<20 {
			t.Errorf("an answer written %v after the request came whole: the write deadline of %v is not in force", 2*writeTimeout, writeTimeout)
		}
	}

	resp, err := http.Get("http://" + addr + "/debug/pprof/profile?seconds=1")
	if err != nil {
		t.Fatalf("profile: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("profile answered %d %q", resp.StatusCode, b)
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatalf("profile: not gzip: %v", err)
	}
	if n, err := io.Copy(io.Discard, zr); err != nil || n == 0 {
		t.Errorf("a profile of 1 s past a write deadline of %v: %d bytes, %v; want it whole", writeTimeout, n, err)
	}
}

// The server's errors are log records, not raw lines on stderr: an accept
// failing over and over (descriptors exhausted) writes a few warnings with
// the server's text as error, not one line per retry.
func TestAcceptErrorsAreThrottledLogRecords(t *testing.T) {
	const failures = logBurst + 2
	var out syncBuffer
	logger := slog.New(slog.NewJSONHandler(&out, nil))
	ln := &failingListener{failures: failures, blocked: make(chan struct{}), done: make(chan struct{})}
	stop := Serve(ln, http.NotFoundHandler(), DefaultServerLimits(), logger)
	<-ln.blocked // every failure returned, each logged before the next accept
	stop()
	var warnings int
	for line := range strings.Lines(out.String()) {
		var rec struct{ Level, Msg, Error string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON record: %q", line)
		}
		if rec.Msg != "HTTP server error" || rec.Level != "WARN" || !strings.Contains(rec.Error, "too many open files") {
			t.Errorf("record %q: want a warning \"HTTP server error\" quoting the accept error", line)
		}
		warnings++
	}
	if warnings != logBurst {
		t.Errorf("%d failed accepts logged %d records, want the first %d", failures, warnings, logBurst)
	}
}

// failingListener fails its first accepts as a process out of descriptors
// does, then waits to be closed.
type failingListener struct {
	mu       sync.Mutex
	failures int
	blocked  chan struct{} // closed once it waits
	done     chan struct{}
	once     sync.Once
}

func (l *failingListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if l.failures > 0 {
		l.failures--
		l.mu.Unlock()
		// As the runtime reports it; net/http retries it, as Temporary says.
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	l.mu.Unlock()
	l.once.Do(func() { close(l.blocked) })
	<-l.done
	return nil, net.ErrClosed
}

func (l *failingListener) Close() error {
	select {
	case <-l.done:
	default:
		close(l.done)
	}
	return nil
}

func (l *failingListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// countingHandler counts the records it is given and what they say was
// suppressed before them.
type countingHandler struct {
	passed, suppressed *int
}

func (h countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countingHandler) Handle(_ context.Context, r slog.Record) error {
	*h.passed++
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "suppressed" {
			*h.suppressed += int(a.Value.Int64())
		}
		return true
	})
	return nil
}
func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countingHandler) WithGroup(string) slog.Handler      { return h }

// For any run of records: at most burst plus one per every of the time they
// span pass; one coming every or more after the one before always passes;
// and every record is accounted for, passed or counted as suppressed by a
// later one (but those dropped after the last passed).
func TestThrottlePassesABurstThenOnePerInterval(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		burst := rapid.IntRange(1, 8).Draw(t, "burst")
		every := time.Duration(rapid.IntRange(1, 1000).Draw(t, "every_ms")) * time.Millisecond
		gaps := rapid.SliceOfN(rapid.IntRange(0, 3000), 1, 200).Draw(t, "gaps_ms")
		var passed, suppressed int
		h := newThrottle(countingHandler{&passed, &suppressed}, burst, every)
		start := time.Unix(1_000_000, 0)
		now, lastPassedAt := start, -1
		for i, g := range gaps {
			now = now.Add(time.Duration(g) * time.Millisecond)
			before := passed
			if err := h.Handle(context.Background(), slog.NewRecord(now, slog.LevelWarn, "x", 0)); err != nil {
				t.Fatal(err)
			}
			if passed > before {
				lastPassedAt = i
			} else if i > 0 && time.Duration(g)*time.Millisecond >= every {
				t.Fatalf("record %d, %v after the one before, was dropped (every %v)", i, time.Duration(g)*time.Millisecond, every)
			}
		}
		span := now.Sub(start)
		if limit := burst + int(span/every); passed > limit {
			t.Fatalf("%d records passed over %v, want at most %d", passed, span, limit)
		}
		if passed+suppressed != lastPassedAt+1 {
			t.Fatalf("%d passed + %d suppressed, want the %d up to the last passed", passed, suppressed, lastPassedAt+1)
		}
		if passed == 0 {
			t.Fatal("nothing passed")
		}
	})
}
