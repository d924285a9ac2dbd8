package clients

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/patchflow/patchflow/internal/redact"
	"github.com/patchflow/patchflow/messages"
)

// Defaults for the zero values of the options' retry fields.
const (
	defaultTimeout     = 10 * time.Second
	defaultMaxAttempts = 5
	defaultBackoffMin  = 100 * time.Millisecond
	defaultBackoffMax  = 5 * time.Second
)

// Body limits.
const (
	// drainLimit bounds how much of an unused body (an error page, the
	// rest of a decoded one) is read before closing. Reading it to the end
	// lets the transport put the connection back in the pool; past this
	// limit a fresh connection is cheaper than the read.
	drainLimit = 1 << 20
	// errorSnippetBytes is how much of an error body StatusError keeps.
	errorSnippetBytes = 512
)

// errTooLarge reports a success body over its client's cap
// (answerShape.maxBody), or one whose decoding would hold more than one
// answer may (maxAnswerBytes): more than any answer should be, so the
// service (or something between it and us) is broken or hostile. It is the
// dependency's failure, judged by the pipeline like an outage; another
// attempt of the same request would only fetch the same body, so it is not
// retried within the call.
var errTooLarge = errors.New("response body too large")

// retryConfig is the validated retry policy shared by both clients.
type retryConfig struct {
	timeout     time.Duration // per attempt, including reading the body
	maxAttempts int
	backoffMin  time.Duration
	backoffMax  time.Duration
}

// newRetryConfig applies the defaults to zero values and rejects values that
// cannot be meant (negative, or a cap below the floor).
func newRetryConfig(timeout time.Duration, maxAttempts int, backoffMin, backoffMax time.Duration) (retryConfig, error) {
	if timeout < 0 || maxAttempts < 0 || backoffMin < 0 || backoffMax < 0 {
		return retryConfig{}, errors.New("timeout, attempts and backoff must not be negative")
	}
	c := retryConfig{
		timeout:     cmp.Or(timeout, defaultTimeout),
		maxAttempts: cmp.Or(maxAttempts, defaultMaxAttempts),
		backoffMin:  cmp.Or(backoffMin, defaultBackoffMin),
		backoffMax:  cmp.Or(backoffMax, defaultBackoffMax),
	}
	if c.backoffMax < c.backoffMin {
		return retryConfig{}, fmt.Errorf("backoff max %s is below backoff min %s", c.backoffMax, c.backoffMin)
	}
	return c, nil
}

// requestFunc builds a fresh request bound to ctx. It is called once per
// attempt because a request body can be read only once.
type requestFunc func(ctx context.Context) (*http.Request, error)

// retrier sends one logical request as up to maxAttempts HTTP attempts. It is
// safe for concurrent use; the counters are for the clients' Stats.
type retrier struct {
	cfg    retryConfig
	client *http.Client
	// secrets are the base URL's (its password, in every form: see
	// redact.Secrets); the errors of an attempt have them masked.
	secrets []string
	// refusals says which answers, beyond a 400, refuse the request itself
	// (see blame).
	refusals refusals
	// answers is the budget the successful answers are read and decoded
	// in (nil: no bound), shape what reading and decoding one holds.
	answers  *AnswerBudget
	shape    answerShape
	requests atomic.Uint64 // attempts sent
	retries  atomic.Uint64 // attempts after the first
	// report, when set, hears each attempt: the caller's context, its
	// duration and its outcome for the service (see reportErr).
	report atomic.Pointer[func(ctx context.Context, took time.Duration, err error)]
}

// observe reports one attempt, when someone listens.
func (r *retrier) observe(ctx context.Context, took time.Duration, res attemptResult) {
	if f := r.report.Load(); f != nil {
		(*f)(ctx, took, reportErr(res))
	}
}

// reportErr is an attempt's outcome as consumer.DependencyReporter reads
// it: nil when served (an answer this process had no room to read
// included: the service answered), a permanent error when the service
// answered with a refusal of the request (it is up and the request is
// wrong: see blame), a transient one when it gave no answer it could serve
// (a timeout, no connection, a 5xx, or a status saying the service or the
// way to it is wrong: 401, 403, a 404 on the endpoint, a body over the cap).
func reportErr(res attemptResult) error {
	switch res.outcome {
	case succeeded, congested:
		return nil
	case permanent:
		return messages.Permanent(res.err)
	}
	return messages.Transient(res.err)
}

// outcome says what the loop does after an attempt.
type outcome int

const (
	succeeded outcome = iota
	// retryable: the dependency failed in a way another attempt soon may
	// not meet: 408, 429, 502, 503, 504, a connection error, a timeout, a
	// body cut short. Retried within the call, then returned transient.
	retryable
	// permanent: the request is wrong for this record (see blame), or could
	// not be built. Returned at once; the record is dead-lettered.
	permanent
	// transient: the dependency failed in a way a backoff of milliseconds
	// will not heal (401, 403, a 404 on the endpoint, 405, 413, 500, 501,
	// any other status, a body over the cap). Returned at once, for the
	// pipeline's retry rule to judge whose failure it was.
	transient
	// congested: the service answered, and this process had no room to
	// read the answer (AnswerBudget): its wait for room ended with the
	// attempt, or the answer needed more than it was charged while the
	// rest was taken. Neither the record's failure nor the service's: the
	// next attempt waits for what this one learned the answer needs, and
	// when the attempts run out the call fails transient and
	// messages.Congested.
	congested
)

// refusals names the answers a client's service gives to refuse the request
// itself, beyond the 400 every service gives.
type refusals struct {
	// inputNames are the names of the request's fields: a 422 whose body
	// names one of them refuses this request's input.
	inputNames []string
	// notFoundIsAnswer makes a 404 the service's answer about what the
	// request names (the inventory: no such host), not a wrong endpoint.
	notFoundIsAnswer bool
}

// blame says whose failure a non-2xx answer with status code is, from the
// start of its body (head): permanent when it says the request is wrong for
// this record (400; 422 naming the input; a 404 where the service answers
// so for what the request names), so that no retry can help. Anything else
// says the dependency, or what stands between it and us (an auth proxy, a
// gateway, a wrong URL), is wrong: every record would meet it, so it is
// never the record's own at once. It is retryable within the call when the
// status says so (408, 429, 502, 503, 504), transient otherwise.
func (rf refusals) blame(code int, head string) outcome {
	switch code {
	case http.StatusBadRequest:
		return permanent
	case http.StatusUnprocessableEntity:
		if rf.namesInput(head) {
			return permanent
		}
	case http.StatusNotFound:
		if rf.notFoundIsAnswer {
			return permanent
		}
	case http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return retryable
	}
	return transient
}

// namesInput reports whether an error body names one of the request's
// fields: the service read the request and refuses what it holds.
func (rf refusals) namesInput(head string) bool {
	for _, name := range rf.inputNames {
		if strings.Contains(head, name) {
			return true
		}
	}
	return false
}

// attemptResult is one attempt's result: the body on success, with what
// it holds of the answer budget, otherwise the error and, for a retryable
// status, the server's Retry-After, for a congested one what the answer
// needs.
type attemptResult struct {
	outcome       outcome
	body          []byte
	answer        *reservation // on success; the caller releases it
	err           error
	retryAfter    time.Duration
	hasRetryAfter bool
	learned       int64
}

// do runs the attempts and returns the body of the first 2xx response, and
// the release of what it holds of the answer budget: the caller calls it,
// once, when it has decoded the body (after which the body must not be
// used). On error the release is a no-op.
//
// Errors: the caller's context ending is returned as its context error,
// unclassified (errors.Is(err, context.Canceled) holds and ClassOf says
// cancelled; a caller deadline reads as transient), and marked
// messages.Congested when it ended a wait for the answer budget. A status
// that is not retried within the call is returned at once as a
// *StatusError, wrapped with messages.Permanent when it refuses the request
// (see blame) and with messages.Transient otherwise. When the attempts run
// out on retryable failures, the last failure is returned wrapped with
// messages.Transient so the pipeline retries the record later, and also
// with messages.Congested when it was a want of room for the answer. op
// prefixes every message.
func (r *retrier) do(ctx context.Context, op string, newRequest requestFunc) ([]byte, func(), error) {
	return r.doInto(ctx, op, newRequest, nil)
}

// doInto is do reading the body into buf (see readAnswer), which the
// caller may then reuse.
func (r *retrier) doInto(ctx context.Context, op string, newRequest requestFunc, buf []byte) ([]byte, func(), error) {
	read := answerRead{buf: buf, budget: r.answers, shape: r.shape}
	for n := 1; ; n++ {
		if ctx.Err() != nil {
			return nil, noRelease, contextError(ctx, op)
		}
		r.requests.Add(1)
		if n > 1 {
			r.retries.Add(1)
		}
		start := time.Now()
		res := r.attempt(ctx, newRequest, read)
		if res.outcome == congested {
			r.answers.congestedAttempt()
			read.learned = res.learned
		}
		// A failure caused by the caller's context is the caller's doing,
		// not the server's: report it as such whatever the attempt saw.
		// While waiting for room, it is congestion too.
		if res.outcome != succeeded && ctx.Err() != nil {
			err := contextError(ctx, op)
			if res.outcome == congested {
				err = messages.Congested(err)
			}
			return nil, noRelease, err
		}
		// The caller's own cancellation says nothing of the service, so it is
		// not reported (above); a refusal of the request says it is up.
		r.observe(ctx, time.Since(start), res)
		switch res.outcome {
		case succeeded:
			return res.body, res.answer.release, nil
		case permanent:
			return nil, noRelease, messages.Permanent(fmt.Errorf("%s: %w", op, res.err))
		case transient:
			return nil, noRelease, messages.Transient(fmt.Errorf("%s: %w", op, res.err))
		}
		if n >= r.cfg.maxAttempts {
			err := messages.Transient(fmt.Errorf("%s: giving up after %d attempts: %w", op, n, res.err))
			if res.outcome == congested {
				err = messages.Congested(err)
			}
			return nil, noRelease, err
		}
		wait := r.backoff(n)
		if res.hasRetryAfter {
			// The server knows better than our jitter when it will be
			// back, but a long Retry-After must not park an evaluation
			// beyond the configured cap.
			wait = min(res.retryAfter, r.cfg.backoffMax)
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, noRelease, contextError(ctx, op)
		}
	}
}

func noRelease() {}

// answerRead is how an attempt reads a successful body: into buf, charged
// to budget (nil: no bound) as shape says, waiting for at least learned
// bytes (what an earlier attempt of the call learned the answer needs).
type answerRead struct {
	buf     []byte
	budget  *AnswerBudget
	shape   answerShape
	learned int64
}

// attempt sends one request under the per-attempt timeout and reads the
// body within that same timeout, so a server that stalls mid-body counts as
// a timeout too. Whatever happens, the body is drained and closed.
//
// A 2xx body is read only once the answer budget holds what it is
// expected to need (answerShape.anticipate of its announced length, or of
// guessBytes, or what an earlier attempt learned): the wait, holding
// nothing of the budget, ends when enough is given back or with the
// attempt (its deadline, or the caller's context), as congestion. On
// success the result holds the answer's need (readAnswer); otherwise
// nothing.
func (r *retrier) attempt(ctx context.Context, newRequest requestFunc, read answerRead) attemptResult {
	actx, cancel := context.WithTimeout(ctx, r.cfg.timeout)
	defer cancel() // runs after drainAndClose below: defers are LIFO

	req, err := newRequest(actx)
	if err != nil {
		return attemptResult{outcome: permanent, err: redact.Error(fmt.Errorf("building request: %w", err), r.secrets)}
	}
	resp, err := r.client.Do(req)
	if err != nil {
		// Connection refused or reset, DNS failure, TLS failure, attempt
		// timeout: all worth another try against a service that restarts.
		// net/http's *url.Error quotes the URL with the password as ***;
		// the redaction is for any other form it may take.
		return attemptResult{outcome: retryable, err: redact.Error(r.annotateTimeout(actx, err), r.secrets)}
	}
	defer drainAndClose(resp.Body)

	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if resp.ContentLength > read.shape.maxBody {
			return attemptResult{outcome: transient, err: tooLarge(read.shape.maxBody)}
		}
		want := read.shape.anticipate(guessBytes)
		if resp.ContentLength >= 0 {
			want = read.shape.anticipate(resp.ContentLength + 1)
		}
		want = max(want, read.learned)
		res, err := reserve(actx, read.budget, want)
		if err != nil {
			return attemptResult{outcome: congested, learned: want,
				err: r.annotateTimeout(actx, fmt.Errorf("waiting for %d bytes of the answer budget: %w", want, err))}
		}
		body, err := readAnswer(resp.Body, resp.ContentLength, read.buf, res, read.shape)
		if learned, ok := isNoRoom(err); ok {
			return attemptResult{outcome: congested, learned: learned, err: err}
		}
		switch {
		case errors.Is(err, errTooLarge):
			return attemptResult{outcome: transient, err: err}
		case err != nil:
			return attemptResult{outcome: retryable, err: redact.Error(r.annotateTimeout(actx, fmt.Errorf("reading response: %w", err)), r.secrets)}
		}
		return attemptResult{outcome: succeeded, body: body, answer: res}
	}

	head, _ := io.ReadAll(io.LimitReader(resp.Body, errorSnippetBytes))
	serr := &StatusError{
		Method:     req.Method,
		URL:        req.URL.Redacted(),
		StatusCode: resp.StatusCode,
		Body:       snippet(head),
	}
	o := r.refusals.blame(resp.StatusCode, serr.Body)
	if o == retryable {
		d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		return attemptResult{outcome: retryable, err: serr, retryAfter: d, hasRetryAfter: ok}
	}
	return attemptResult{outcome: o, err: serr}
}

// annotateTimeout says so when err comes from the per-attempt deadline, which
// the bare "context deadline exceeded" does not tell apart from the caller's.
func (r *retrier) annotateTimeout(actx context.Context, err error) error {
	if errors.Is(actx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("attempt timed out after %s: %w", r.cfg.timeout, err)
	}
	return err
}

// backoff returns the wait after failed attempt n (1 for the first): full
// jitter, uniform in [0, min(backoffMax, backoffMin·2^(n-1))], so that many
// evaluations failing together do not come back together.
func (r *retrier) backoff(n int) time.Duration {
	ceiling := r.cfg.backoffMin
	for i := 1; i < n && ceiling < r.cfg.backoffMax; i++ {
		ceiling *= 2
	}
	ceiling = min(ceiling, r.cfg.backoffMax)
	return rand.N(ceiling + 1)
}

// parseRetryAfter reads a Retry-After value: delay-seconds, or an HTTP date
// (RFC 9110 allows both). ok is false when the header is absent or invalid,
// in which case the normal backoff applies.
func parseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		// Saturate instead of overflowing; the caller caps it anyway.
		if secs > math.MaxInt64/int64(time.Second) {
			return math.MaxInt64, true
		}
		return time.Duration(secs) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// sleep waits for d or until ctx ends, whichever is first.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// contextError reports the end of the caller's context. The cause, when the
// canceller set one, is added as text only so that the class stays the
// context's (cancelled, or transient for a deadline).
func contextError(ctx context.Context, op string) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("%s: %w (cause: %v)", op, err, cause)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// drainAndClose reads what is left of body, up to drainLimit, and closes it:
// the transport reuses a connection only when its body was read to the end.
func drainAndClose(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, drainLimit))
	_ = body.Close()
}
