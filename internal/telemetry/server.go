package telemetry

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// ServerLimits bound Serve's server, so that no client holds a connection
// for long (one that connects and never asks, sends its request a byte at
// a time, never reads its answer, or keeps its connection alive unused),
// and no number of clients starves the probes.
type ServerLimits struct {
	// ReadTimeout bounds reading a request, its header and its body.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing an answer, counted from the end of its
	// request's header. pprof's profile and trace (WithPprof) get the
	// seconds they are asked for on top (net/http/pprof extends the
	// deadline itself).
	WriteTimeout time.Duration
	// IdleTimeout is how long a kept-alive connection waits for its next
	// request.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's header (net/http allows 4 KiB of
	// slack): a larger one is answered 431.
	MaxHeaderBytes int
	// MaxConns bounds the connections open at once (see Serve); a value
	// under MinServerConns counts as MinServerConns.
	MaxConns int
}

// MinServerConns is the least ServerLimits.MaxConns: one connection kept
// for the probes beside three for everything else.
const MinServerConns = 4

// DefaultServerLimits are the limits of a server configured with none.
func DefaultServerLimits() ServerLimits {
	return ServerLimits{ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute,
		MaxHeaderBytes: 16 << 10, MaxConns: 64}
}

// shutdownGrace is how long stop lets the requests being answered finish
// before it closes their connections.
const shutdownGrace = 5 * time.Second

// Serve serves h on ln until stop is called, within limits.
//
// At most limits.MaxConns connections are open at once. At the cap a new
// connection takes the place of the one idle longest: one waiting for its
// first request, reading a request's header, kept alive between requests,
// or reading what remains of a body its handler left unread; a connection
// whose request is in its handler is never closed for another. So that
// some connections are always idle or about to be, requests other than the
// probes (/healthz and /readyz, whose handlers return at once) are
// answered by at most MaxConns − MaxConns/4 handlers at a time, and
// beyond that with 503 at once. What ends each wait: a connection never
// asking is closed by ReadTimeout or by the next connection at the cap;
// a request is read within ReadTimeout; an answer is written within
// WriteTimeout; a kept-alive connection waits IdleTimeout at most.
//
// The server's own errors (a failed accept, a panic in a handler, a
// malformed request it logs) are warnings through logger, "HTTP server
// error" with the server's text as error, at most a few a minute: an
// accept failing in a loop (descriptors exhausted) writes one record
// every few seconds, the rest counted into the next as suppressed.
func Serve(ln net.Listener, h http.Handler, limits ServerLimits, logger *slog.Logger) (stop func()) {
	_, stop = serve(ln, h, limits, logger)
	return stop
}

// serve is Serve, with the listener that counts the connections.
func serve(ln net.Listener, h http.Handler, limits ServerLimits, logger *slog.Logger) (*connLimit, func()) {
	cl := newConnLimit(ln, limits.MaxConns, logger)
	srv := &http.Server{
		Handler:           cl.guard(h),
		ReadHeaderTimeout: limits.ReadTimeout,
		ReadTimeout:       limits.ReadTimeout,
		WriteTimeout:      limits.WriteTimeout,
		IdleTimeout:       limits.IdleTimeout,
		MaxHeaderBytes:    limits.MaxHeaderBytes,
		ConnContext:       cl.connContext,
		ErrorLog:          slog.NewLogLogger(serverErrors{newThrottle(logger.Handler(), logBurst, logEvery)}, slog.LevelWarn),
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(cl); !errors.Is(err, http.ErrServerClosed) {
			logger.Error("HTTP server stopped", "error", err)
		}
	}()
	return cl, func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			_ = srv.Close() // a profile still streaming, a client not reading
		}
		<-done
	}
}

// logBurst records at once, then one per logEvery: what the server's error
// log and the connection cap's notes write at most.
const (
	logBurst = 5
	logEvery = 10 * time.Second
)

// serverErrors turns a line of http.Server's error log into a record of its
// own: the message "HTTP server error", the line as error.
type serverErrors struct{ next slog.Handler }

func (s serverErrors) Enabled(ctx context.Context, l slog.Level) bool { return s.next.Enabled(ctx, l) }

func (s serverErrors) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, "HTTP server error", r.PC)
	out.AddAttrs(slog.String("error", r.Message))
	r.Attrs(func(a slog.Attr) bool { out.AddAttrs(a); return true })
	return s.next.Handle(ctx, out)
}

func (s serverErrors) WithAttrs(as []slog.Attr) slog.Handler {
	return serverErrors{s.next.WithAttrs(as)}
}

func (s serverErrors) WithGroup(name string) slog.Handler {
	return serverErrors{s.next.WithGroup(name)}
}

// throttle passes burst records at once, then one per every (by the
// records' own times), and drops the rest; the next record it passes
// carries how many it dropped as suppressed.
type throttle struct {
	next  slog.Handler
	state *throttleState // shared by the handlers WithAttrs and WithGroup derive
}

type throttleState struct {
	burst int
	every time.Duration

	mu         sync.Mutex
	tokens     float64
	last       time.Time // when tokens was last brought up to date
	suppressed int
}

func newThrottle(next slog.Handler, burst int, every time.Duration) throttle {
	return throttle{next: next, state: &throttleState{burst: burst, every: every, tokens: float64(burst)}}
}

// admit says whether a record at t passes, and how many were dropped
// before it.
func (s *throttleState) admit(t time.Time) (bool, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.last.IsZero() && t.After(s.last) {
		s.tokens = min(float64(s.burst), s.tokens+float64(t.Sub(s.last))/float64(s.every))
	}
	if s.last.IsZero() || t.After(s.last) {
		s.last = t
	}
	if s.tokens < 1 {
		s.suppressed++
		return false, 0
	}
	s.tokens--
	n := s.suppressed
	s.suppressed = 0
	return true, n
}

func (t throttle) Enabled(ctx context.Context, l slog.Level) bool { return t.next.Enabled(ctx, l) }

func (t throttle) Handle(ctx context.Context, r slog.Record) error {
	ok, suppressed := t.state.admit(r.Time)
	if !ok {
		return nil
	}
	if suppressed > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int("suppressed", suppressed))
	}
	return t.next.Handle(ctx, r)
}

func (t throttle) WithAttrs(as []slog.Attr) slog.Handler {
	return throttle{next: t.next.WithAttrs(as), state: t.state}
}

func (t throttle) WithGroup(name string) slog.Handler {
	return throttle{next: t.next.WithGroup(name), state: t.state}
}
