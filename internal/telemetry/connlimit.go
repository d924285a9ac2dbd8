package telemetry

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
)

// connLimit is a listener that keeps at most max connections open (Serve
// says how). Its guard marks which connections have a request in a
// handler: those are never closed for a new one.
type connLimit struct {
	net.Listener
	max   int // connections open at most
	heavy int // handlers of requests other than the probes running at most
	notes *slog.Logger

	mu      sync.Mutex
	changed *sync.Cond // a connection closed or left its handler, or the listener closed
	conns   map[*limitedConn]struct{}
	clock   uint64 // ticks at each accept and each handler's end: orders the idle
	running int    // handlers of requests other than the probes running now
	closed  bool
}

// limitedConn is a connection connLimit counts.
type limitedConn struct {
	net.Conn
	l *connLimit

	// Guarded by l.mu.
	inHandler int    // requests of this connection in a handler (one, for HTTP/1.1)
	idleSince uint64 // l.clock when it was accepted or its last handler ended
	gone      bool   // no longer counted: closed, or chosen to be

	closeOnce sync.Once
	closeErr  error
}

type connKey struct{}

func newConnLimit(ln net.Listener, maxConns int, logger *slog.Logger) *connLimit {
	maxConns = max(maxConns, MinServerConns)
	l := &connLimit{Listener: ln, max: maxConns, heavy: maxConns - maxConns/4, conns: map[*limitedConn]struct{}{},
		notes: slog.New(newThrottle(logger.Handler(), logBurst, logEvery))}
	l.changed = sync.NewCond(&l.mu)
	return l
}

// Accept returns the next connection once one is open fewer than max: at
// the cap it closes the connection idle longest, or, with every one in a
// handler, waits until one leaves its handler or closes.
func (l *connLimit) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	lc := &limitedConn{Conn: c, l: l}
	var evicted *limitedConn
	l.mu.Lock()
	for len(l.conns) >= l.max && !l.closed {
		if evicted = l.longestIdle(); evicted != nil {
			evicted.gone = true
			delete(l.conns, evicted)
			break
		}
		l.changed.Wait()
	}
	if l.closed {
		l.mu.Unlock()
		c.Close()
		return nil, net.ErrClosed
	}
	l.clock++
	lc.idleSince = l.clock
	l.conns[lc] = struct{}{}
	l.mu.Unlock()
	if evicted != nil {
		_ = evicted.close()
		l.notes.Warn("HTTP connections at their cap: closed the one idle longest for a new one", "max_conns", l.max)
	}
	return lc, nil
}

// longestIdle is the open connection idle longest, nil when every one has a
// request in a handler. The caller holds l.mu.
func (l *connLimit) longestIdle() *limitedConn {
	var oldest *limitedConn
	for c := range l.conns {
		if c.inHandler == 0 && (oldest == nil || c.idleSince < oldest.idleSince) {
			oldest = c
		}
	}
	return oldest
}

// Close closes the listener and ends a wait in Accept.
func (l *connLimit) Close() error {
	l.mu.Lock()
	l.closed = true
	l.changed.Broadcast()
	l.mu.Unlock()
	return l.Listener.Close()
}

// connContext gives a request's handler its connection (http.Server's
// ConnContext).
func (l *connLimit) connContext(ctx context.Context, c net.Conn) context.Context {
	if lc, ok := c.(*limitedConn); ok {
		return context.WithValue(ctx, connKey{}, lc)
	}
	return ctx
}

// isProbe says whether r asks what the kubelet's probes ask: handlers that
// answer at once, never limited.
func isProbe(r *http.Request) bool { return r.URL.Path == "/healthz" || r.URL.Path == "/readyz" }

// guard marks a connection as in a handler while h answers its request, and
// answers 503 at once to a request other than the probes while l.heavy of
// them are being answered.
func (l *connLimit) guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := r.Context().Value(connKey{}).(*limitedConn)
		probe := isProbe(r)
		if !l.enter(c, probe) {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "too many requests being answered at once; try again", http.StatusServiceUnavailable)
			return
		}
		defer l.leave(c, probe)
		h.ServeHTTP(w, r)
	})
}

func (l *connLimit) enter(c *limitedConn, probe bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !probe {
		if l.running >= l.heavy {
			return false
		}
		l.running++
	}
	if c != nil {
		c.inHandler++
	}
	return true
}

func (l *connLimit) leave(c *limitedConn, probe bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !probe {
		l.running--
	}
	if c != nil {
		c.inHandler--
		l.clock++
		c.idleSince = l.clock
	}
	l.changed.Broadcast()
}

// open is how many connections are counted now.
func (l *connLimit) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// Close closes the connection and stops counting it.
func (c *limitedConn) Close() error {
	c.l.mu.Lock()
	if !c.gone {
		c.gone = true
		delete(c.l.conns, c)
		c.l.changed.Broadcast()
	}
	c.l.mu.Unlock()
	return c.close()
}

func (c *limitedConn) close() error {
	c.closeOnce.Do(func() { c.closeErr = c.Conn.Close() })
	return c.closeErr
}
