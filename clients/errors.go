package clients

import (
	"fmt"
	"strings"
)

// StatusError is a response whose HTTP status the clients do not accept.
// It is always returned wrapped in a class (see the package doc), so test for
// it with errors.As.
type StatusError struct {
	Method     string
	URL        string // redacted: no password
	StatusCode int
	// Body is the start of the response body (at most errorSnippetBytes),
	// because the reason for a 400 is usually spelled out there.
	Body string
}

func (e *StatusError) Error() string {
	if e.Body == "" {
		return fmt.Sprintf("%s %s: HTTP %d", e.Method, e.URL, e.StatusCode)
	}
	return fmt.Sprintf("%s %s: HTTP %d: %q", e.Method, e.URL, e.StatusCode, e.Body)
}

// snippet turns the start of an error body into something safe to log on one
// line: valid UTF-8 and trimmed (Error quotes it).
func snippet(b []byte) string {
	return strings.TrimSpace(strings.ToValidUTF8(string(b), "\uFFFD"))
}
