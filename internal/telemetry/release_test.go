package telemetry_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/internal/telemetry"
)

// The release route refuses every request without the operator's token
// before it looks at anything, and a malformed one after.
func TestReleaseNeedsTheToken(t *testing.T) {
	const token = "a-token-of-some-length"
	looked := false
	h := telemetry.ReleaseHandler(func() *actors.Bridge { looked = true; return nil }, token)
	for _, c := range []struct {
		name, auth, query string
		want              int
	}{
		{"no token", "", "topic=events&partition=0&offset=5", http.StatusUnauthorized},
		{"wrong token", "Bearer not-the-token-at-all", "topic=events&partition=0&offset=5", http.StatusUnauthorized},
		{"token as basic", "Basic " + token, "topic=events&partition=0&offset=5", http.StatusUnauthorized},
		{"a prefix of it", "Bearer " + token[:10], "topic=events&partition=0&offset=5", http.StatusUnauthorized},
		{"no offset", "Bearer " + token, "topic=events&partition=0", http.StatusBadRequest},
		{"a negative partition", "Bearer " + token, "topic=events&partition=-1&offset=5", http.StatusBadRequest},
		{"not running", "Bearer " + token, "topic=events&partition=0&offset=5", http.StatusServiceUnavailable},
	} {
		looked = false
		req := httptest.NewRequest(http.MethodPost, "/records/release?"+c.query, nil)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, rec.Code, strings.TrimSpace(rec.Body.String()), c.want)
		}
		if c.want == http.StatusUnauthorized && (looked || rec.Header().Get("WWW-Authenticate") == "") {
			t.Errorf("%s: looked at the bridge %v, WWW-Authenticate %q", c.name, looked, rec.Header().Get("WWW-Authenticate"))
		}
	}
}
