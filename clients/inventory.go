package clients

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/patchflow/patchflow/internal/redact"
	"github.com/patchflow/patchflow/messages"
)

// ErrHostNotFound is matched (errors.Is) by SystemProfile's error when the
// inventory does not know the host. That error is also permanent: the host
// was deleted, and asking again will not bring it back.
var ErrHostNotFound = errors.New("host not found in inventory")

// InventoryOptions configures an Inventory client. Zero values take the
// defaults, the same as VMaaSOptions'.
type InventoryOptions struct {
	// Timeout bounds one attempt, reading the body included (default 10s).
	Timeout time.Duration
	// MaxAttempts bounds the attempts of one call, the first included
	// (default 5).
	MaxAttempts int
	// BackoffMin and BackoffMax bound the wait between attempts (defaults
	// 100ms and 5s); BackoffMax also caps a server's Retry-After.
	BackoffMin, BackoffMax time.Duration
	// HTTPClient sends the requests; nil means a pooled default client.
	// Authentication headers the inventory needs belong in its Transport.
	HTTPClient *http.Client
	// Answers is the budget the answers are read and decoded in, shared
	// with the process's other clients; nil: each answer is bounded on its
	// own (4 MiB on the wire), not their sum.
	Answers *AnswerBudget
}

// Inventory is a client of the host inventory API. It is safe for concurrent
// use. Each call costs one HTTP round trip per attempt; nothing is cached,
// since a system profile changes with every upload.
type Inventory struct {
	hostsURL string // ends in "/hosts/"
	http     *http.Client
	retry    *retrier
}

// NewInventory returns a client for the inventory at baseURL (scheme, host
// and optional path prefix). It fails on a base URL that is not absolute
// http(s), or on invalid options.
func NewInventory(baseURL string, opts InventoryOptions) (*Inventory, error) {
	base, err := parseBaseURL(baseURL)
	if err != nil {
		return nil, fmt.Errorf("inventory client: %w", err)
	}
	cfg, err := newRetryConfig(opts.Timeout, opts.MaxAttempts, opts.BackoffMin, opts.BackoffMax)
	if err != nil {
		return nil, fmt.Errorf("inventory client: %w", err)
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = newDefaultHTTPClient()
	}
	return &Inventory{
		hostsURL: base + "/api/inventory/v1/hosts/",
		http:     hc,
		// A 404 is the inventory's answer for a host it does not know
		// (ErrHostNotFound), which its path names.
		retry: &retrier{cfg: cfg, client: hc, secrets: redact.Secrets(base), refusals: refusals{notFoundIsAnswer: true},
			answers: opts.Answers, shape: inventoryShape},
	}, nil
}

// inventoryShape bounds what an inventory answer holds read and decoded:
// its body and the page (json.Unmarshal copies the ids and the profiles
// out of it). A result is a string and a slice header (40 bytes), from as
// little as "{},", held with its slice's slack: 96 bytes an object or
// null, enough for the nested objects of a profile too, which are only
// copied. A body is capped at 4 MiB: a profile is what an event carries,
// and an event over MAX_MESSAGE_BYTES (1 MB by default) is refused.
var inventoryShape = answerShape{maxBody: 4 << 20, perByte: 4, perValue: 96}

// systemProfilePage is the part of the inventory's paged answer we read.
type systemProfilePage struct {
	Results []struct {
		ID            string          `json:"id"`
		SystemProfile json.RawMessage `json:"system_profile"`
	} `json:"results"`
}

// ReportTo makes every HTTP attempt report its duration and whether the
// inventory service served it (see VMaaS.ReportTo).
func (c *Inventory) ReportTo(report func(ctx context.Context, took time.Duration, err error)) {
	c.retry.report.Store(&report)
}

// SystemProfile returns the raw system_profile JSON object of host hostID,
// as the inventory sent it; the caller decodes the fields it needs. hostID is
// path-escaped, so any string is safe to pass.
//
// Errors: an unknown host (404, or no result with that id) matches
// ErrHostNotFound and is permanent, as is an empty or dot-segment hostID;
// other failures are classified as for VMaaS.Updates.
func (c *Inventory) SystemProfile(ctx context.Context, hostID string) (json.RawMessage, error) {
	raw, err := c.systemProfile(ctx, hostID)
	if err != nil {
		return nil, messages.FailedIn(DependencyInventory, err)
	}
	return raw, nil
}

func (c *Inventory) systemProfile(ctx context.Context, hostID string) (json.RawMessage, error) {
	const op = "inventory system profile"
	// PathEscape leaves "." and ".." alone, and a client or proxy would
	// resolve them as dot-segments, asking for another resource entirely.
	if hostID == "" || hostID == "." || hostID == ".." {
		return nil, messages.Permanent(fmt.Errorf("%s: invalid host id %q", op, hostID))
	}
	target := c.hostsURL + url.PathEscape(hostID) + "/system_profile"

	raw, release, err := c.retry.do(ctx, op, func(ctx context.Context) (*http.Request, error) {
		r, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
		if err != nil {
			return nil, err
		}
		r.Header.Set("Accept", "application/json")
		return r, nil
	})
	if err != nil {
		var serr *StatusError
		if errors.As(err, &serr) && serr.StatusCode == http.StatusNotFound {
			return nil, messages.Permanent(fmt.Errorf("%s: host %s: %w: %w", op, hostID, ErrHostNotFound, serr))
		}
		return nil, err
	}
	// The answer's share of the budget covers the body and the page
	// decoded (inventoryShape): it goes back once the profile is copied
	// out, when the caller gets it.
	defer release()

	var page systemProfilePage
	if err := json.Unmarshal(raw, &page); err != nil {
		return nil, messages.Transient(fmt.Errorf("%s: host %s: response is not the expected JSON: %w", op, hostID, err))
	}
	for _, r := range page.Results {
		// Inventory ids are UUIDs, whose hex digits may come back in
		// another case than the caller's.
		if !strings.EqualFold(r.ID, hostID) {
			continue
		}
		if len(r.SystemProfile) == 0 || string(r.SystemProfile) == "null" {
			return nil, messages.Permanent(fmt.Errorf("%s: host %s: result has no system_profile", op, hostID))
		}
		return r.SystemProfile, nil
	}
	// An empty page is how the inventory answers for a host it filtered
	// out or deleted between listing and fetching.
	return nil, messages.Permanent(fmt.Errorf("%s: host %s: %w (%d results, none with this id)", op, hostID, ErrHostNotFound, len(page.Results)))
}

// CloseIdleConnections closes the pooled connections that are idle, for
// shutdown and tests; connections in use are left alone.
func (c *Inventory) CloseIdleConnections() { c.http.CloseIdleConnections() }
