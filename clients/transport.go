package clients

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/patchflow/patchflow/internal/redact"
)

// newDefaultHTTPClient returns the client used when the options carry none.
//
// Hundreds of evaluations call the same host concurrently, and the standard
// library's default of 2 idle connections per host would make most of them
// open (and later tear down) a fresh connection each time; 64 idle per host
// keeps the steady state on pooled connections. There is no Client.Timeout:
// every attempt runs under its own context deadline instead (retry.go), which
// also covers reading the body.
func newDefaultHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   5 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ExpectContinueTimeout: 1 * time.Second,
	}}
}

// parseBaseURL checks that raw is an absolute http(s) URL without query or
// fragment and returns it without a trailing slash, ready for a path to be
// appended. Checking here turns a typo in the configuration into a start-up
// error instead of one failed record per evaluation. Its errors show raw
// with its password masked (internal/redact), malformed or not.
func parseBaseURL(raw string) (string, error) {
	if raw == "" {
		return "", errors.New("base URL is empty")
	}
	if err := redact.Check(raw, checkBaseURL); err != nil {
		return "", fmt.Errorf("base URL %s: %w", redact.URL(raw), err)
	}
	u, _ := url.Parse(raw) // checkBaseURL parsed it
	return strings.TrimRight(u.String(), "/"), nil
}

// checkBaseURL is parseBaseURL's test; its errors do not quote raw.
func checkBaseURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) { // its text quotes the whole URL
			err = uerr.Err
		}
		return err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return errors.New("scheme must be http or https")
	}
	if u.Host == "" {
		return errors.New("no host")
	}
	if u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return errors.New("must not have a query or fragment")
	}
	return nil
}
