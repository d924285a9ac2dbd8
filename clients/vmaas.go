package clients

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/patchflow/patchflow/internal/redact"
	"github.com/patchflow/patchflow/messages"
)

// VMaaSOptions configures a VMaaS client. Zero values take the defaults.
type VMaaSOptions struct {
	// Timeout bounds one attempt, reading the body included (default 10s).
	Timeout time.Duration
	// MaxAttempts bounds the attempts of one call, the first included
	// (default 5).
	MaxAttempts int
	// BackoffMin and BackoffMax bound the wait between attempts (defaults
	// 100ms and 5s); BackoffMax also caps a server's Retry-After.
	BackoffMin, BackoffMax time.Duration
	// CacheSize is the number of answers kept, least recently used evicted
	// first; 0 disables the cache.
	CacheSize int
	// CacheBytes bounds the memory of the answers kept, as estimated from
	// their strings and updates; 0: bounded by CacheSize alone.
	CacheBytes int64
	// Answers is the budget the answers are read and decoded in, shared
	// with the process's other clients; nil: each answer is bounded on its
	// own (16 MiB on the wire, 64 MiB decoded), not their sum.
	Answers *AnswerBudget
	// HTTPClient sends the requests; nil means a client with a pooled
	// transport sized for many concurrent calls to one host. Its Timeout,
	// if set, applies on top of the per-attempt Timeout.
	HTTPClient *http.Client
}

// VMaaS is a client of the VMaaS updates API. It is safe for concurrent use.
//
// Each call costs one HTTP round trip per attempt (or none on a cache hit)
// and keeps the whole answer in memory while decoding it. Retry policy and
// error classes are described in the package doc.
type VMaaS struct {
	updatesURL string
	http       *http.Client
	retry      *retrier
	// cache maps a canonical request to its answer. It holds private
	// copies: callers get clones, so no caller can change what another
	// one reads. nil when disabled.
	cache     *answerCache
	calls     atomic.Uint64
	cacheHits atomic.Uint64
}

// VMaaSStats is a snapshot of a VMaaS client's counters since it was created.
// The fields are read one by one, so under load they may be a few calls
// apart from each other.
type VMaaSStats struct {
	Calls     uint64 // Updates calls
	Requests  uint64 // HTTP attempts sent
	Retries   uint64 // attempts after the first of their call
	CacheHits uint64 // calls answered from the cache, without a request
	// CacheEntries and CacheBytes are the answers the cache keeps and
	// their estimated size.
	CacheEntries int
	CacheBytes   int64
}

// NewVMaaS returns a client for the VMaaS instance at baseURL (scheme, host
// and optional path prefix, e.g. "http://vmaas:8000"). It fails on a base URL
// that is not absolute http(s), or on invalid options.
func NewVMaaS(baseURL string, opts VMaaSOptions) (*VMaaS, error) {
	base, err := parseBaseURL(baseURL)
	if err != nil {
		return nil, fmt.Errorf("vmaas client: %w", err)
	}
	cfg, err := newRetryConfig(opts.Timeout, opts.MaxAttempts, opts.BackoffMin, opts.BackoffMax)
	if err != nil {
		return nil, fmt.Errorf("vmaas client: %w", err)
	}
	if opts.CacheSize < 0 || opts.CacheBytes < 0 {
		return nil, errors.New("vmaas client: cache size must not be negative")
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = newDefaultHTTPClient()
	}
	c := &VMaaS{
		updatesURL: base + "/api/v3/updates",
		http:       hc,
		retry: &retrier{cfg: cfg, client: hc, secrets: redact.Secrets(base), refusals: refusals{inputNames: updatesFields},
			answers: opts.Answers, shape: vmaasShape},
	}
	if opts.CacheSize > 0 {
		if c.cache, err = newAnswerCache(opts.CacheSize, opts.CacheBytes); err != nil {
			return nil, fmt.Errorf("vmaas client: %w", err)
		}
	}
	return c, nil
}

// ReportTo makes every HTTP attempt report its duration and whether VMaaS
// served it: err nil for a response, a permanent error for an answer
// refusing the request (400, or 422 naming its input: VMaaS is up), a
// transient one for anything else that is no answer (a 5xx, a timeout, no
// connection, a 401, 403 or 404, a body over the cap). An answer this
// process had no room to read (AnswerBudget) is reported as served: VMaaS
// answered. Answers from the cache are not calls and are not reported.
// Cancellations by the caller are not reported either.
func (c *VMaaS) ReportTo(report func(ctx context.Context, took time.Duration, err error)) {
	c.retry.report.Store(&report)
}

// Updates asks VMaaS which updates are available for req's packages.
//
// The returned response belongs to the caller, who may modify it: on a cache
// hit it is a fresh deep copy of the cached answer. req is not modified.
// Requests that differ only in the order or repetition of their package,
// repository or module lists share a cache entry.
//
// Errors: a request VMaaS refuses (400, or 422 whose body names one of the
// request's fields) is permanent; any other failure is VMaaS's, transient:
// a failed or unreadable answer (5xx, timeouts after all attempts, a body
// over the cap or not the expected JSON) and a status saying VMaaS, or what
// stands before it, is wrong (401, 403, 404, 405, 413, any other); no room
// for the answer in the answer budget until the attempts end is transient
// and messages.Congested, nobody's failure; the caller's context ending is
// returned as is (see the package doc).
func (c *VMaaS) Updates(ctx context.Context, req *UpdatesRequest) (*UpdatesResponse, error) {
	resp, err := c.updates(ctx, req)
	if err != nil {
		// Named so the pipeline can tell VMaaS failing for everyone from
		// failing for this request alone.
		return nil, messages.FailedIn(DependencyVMaaS, err)
	}
	return resp, nil
}

func (c *VMaaS) updates(ctx context.Context, req *UpdatesRequest) (*UpdatesResponse, error) {
	const op = "vmaas updates"
	c.calls.Add(1)
	if req == nil {
		return nil, messages.Permanent(errors.New(op + ": nil request"))
	}
	body, key := canonicalBody(req)
	if c.cache != nil {
		if cached, ok := c.cache.get(key); ok {
			c.cacheHits.Add(1)
			return cached.Clone(), nil
		}
	}

	buf := bodies.Get().(*[]byte)
	raw, release, err := c.retry.doInto(ctx, op, c.updatesRequest(body), *buf)
	if err != nil {
		bodies.Put(buf)
		return nil, err
	}
	// The answer's share of the budget covers the body, the answer decoded
	// and the cache's copy of it (vmaasShape): it goes back once they are
	// made, when the caller gets the answer.
	defer release()

	var resp UpdatesResponse
	err = unmarshalUpdates(raw, &resp)
	// The answer owns copies of what it keeps, and errors do not refer to
	// the body: the buffer can serve the next call.
	if cap(raw) <= maxPooledBody {
		*buf = raw[:0]
		bodies.Put(buf)
	}
	if err != nil {
		// A 200 with a non-JSON body is typically a proxy's page, not
		// VMaaS's answer: the record can succeed later.
		return nil, messages.Transient(fmt.Errorf("%s: response is not the expected JSON: %w", op, err))
	}
	if resp.UpdateList == nil {
		// VMaaS always sends update_list (empty when nothing matches);
		// without it ("null", "{}") the body is not an answer, and
		// treating it as "no updates" would silently clear a host.
		return nil, messages.Transient(errors.New(op + ": response has no update_list"))
	}
	if c.cache != nil {
		c.cache.add(key, resp.Clone())
	}
	return &resp, nil
}

// updatesRequest builds the POST of body to the updates API.
func (c *VMaaS) updatesRequest(body []byte) requestFunc {
	return func(ctx context.Context) (*http.Request, error) {
		r, err := http.NewRequestWithContext(ctx, http.MethodPost, c.updatesURL, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json")
		// No Accept-Encoding: the transport then asks for gzip itself and
		// decompresses transparently, which it does not do when the
		// header is set by hand.
		return r, nil
	}
}

// PingPackage is the one package whose updates Ping asks for.
const PingPackage = "bash-0:5.1.8-6.el9_1.x86_64"

// pingBody is the health check's request: the updates of one package, the
// path every evaluation's call takes.
var pingBody = []byte(`{"package_list":["` + PingPackage + `"],"security_only":false,"latest_only":false,"third_party":false,"epoch_required":false}`)

// Ping asks VMaaS for the updates of one package, once (no retry, no
// cache, not reported to ReportTo: it is not a call of an evaluation),
// within the client's per-attempt timeout or ctx's deadline. nil when VMaaS
// answers with an update list; otherwise the reason, without secrets. It is
// the pipeline's probe of VMaaS: keep it on the evaluations' path, so it
// fails when their calls would.
//
// Its answer is not charged to the answer budget, so a busy budget does not
// read as VMaaS failing; it is bounded on its own instead (pingShape).
func (c *VMaaS) Ping(ctx context.Context) error {
	res := c.retry.attempt(ctx, c.updatesRequest(pingBody), answerRead{shape: pingShape})
	if res.outcome != succeeded {
		return fmt.Errorf("vmaas ping: %w", res.err)
	}
	var resp UpdatesResponse
	if err := unmarshalUpdates(res.body, &resp); err != nil || resp.UpdateList == nil {
		return errors.New("vmaas ping: the answer is not an updates list")
	}
	return nil
}

// vmaasShape bounds what a VMaaS answer holds read and decoded: its body,
// the UpdatesResponse and the cache's copy of it. An Update is seven
// strings (112 bytes), and may be decoded from as little as "{}," or
// "null,": with the slack of the block it is decoded into (up to twice its
// size) and the cache's copy, 336 bytes an object or null; a map entry
// (its slot, the entries gathered before the map is made, and the copy)
// takes less. A repository is a 16-byte string header, held twice (with
// the slice's slack) and copied once: 48 bytes, 24 a quote. The realistic
// answer (400 packages, 93 KB) needs 8.8 times its size by that count,
// and holds 3.3 (TestAnswerNeedBoundsTheLiveSet).
//
// A body is capped at 16 MiB on the wire: at the realistic 232 bytes a
// package, the answer for a host of 70,000 packages. Its need is capped
// lower still (maxAnswerBytes): realistic answers up to about 7 MiB.
var vmaasShape = answerShape{maxBody: 16 << 20, perByte: 10, perValue: 336, perQuote: 24}

// pingShape bounds Ping's answer, the updates of one package: a few
// hundred bytes from VMaaS, 64 KiB at most (about 7.5 MiB decoded at worst).
var pingShape = answerShape{maxBody: 64 << 10, perByte: vmaasShape.perByte, perValue: vmaasShape.perValue, perQuote: vmaasShape.perQuote}

// bodies recycles the buffers answers are read into, a few hundred
// kilobytes each; those over maxPooledBody are left to the collector.
var bodies = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledBody = 4 << 20

// Stats returns the client's counters.
func (c *VMaaS) Stats() VMaaSStats {
	s := VMaaSStats{
		Calls:     c.calls.Load(),
		Requests:  c.retry.requests.Load(),
		Retries:   c.retry.retries.Load(),
		CacheHits: c.cacheHits.Load(),
	}
	if c.cache != nil {
		s.CacheEntries, s.CacheBytes = c.cache.size()
	}
	return s
}

// CloseIdleConnections closes the pooled connections that are idle, for
// shutdown and tests; connections in use are left alone. With a caller's
// HTTPClient it closes that client's idle connections.
func (c *VMaaS) CloseIdleConnections() { c.http.CloseIdleConnections() }
