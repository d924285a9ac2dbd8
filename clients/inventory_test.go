package clients_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"testing"

	"github.com/patchflow/patchflow/clients"
	"github.com/patchflow/patchflow/messages"
)

const hostID = "3f8d2a8e-5c1b-4d2e-9a7f-0b1c2d3e4f50"

// profilePage answers for the given (id, profile) pairs the way the
// inventory pages its results.
func profilePage(pairs ...string) string {
	results := "["
	for i := 0; i < len(pairs); i += 2 {
		if i > 0 {
			results += ","
		}
		results += fmt.Sprintf(`{"id":%q,"system_profile":%s}`, pairs[i], pairs[i+1])
	}
	results += "]"
	n := len(pairs) / 2
	return fmt.Sprintf(`{"count":%d,"page":1,"per_page":50,"total":%d,"results":%s}`, n, n, results)
}

const sampleProfile = `{"arch":"x86_64","os_release":"9.3","dnf_modules":[{"name":"nodejs","stream":"18"}],"installed_packages":["kernel-5.14.0-1.el9.x86_64"]}`

// jsonEqual compares two JSON documents by value.
func jsonEqual(t *testing.T, got, want []byte) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("result is not JSON: %v: %s", err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("want is not JSON: %v", err)
	}
	return reflect.DeepEqual(g, w)
}

func TestInventorySystemProfileFound(t *testing.T) {
	srv, calls := countingServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if want := "/api/inventory/v1/hosts/" + hostID + "/system_profile"; r.Method != http.MethodGet || r.URL.Path != want {
			t.Errorf("request %s %s, want GET %s", r.Method, r.URL.Path, want)
		}
		// Another host first: the client must pick the result by id.
		_, _ = io.WriteString(w, profilePage("00000000-0000-0000-0000-000000000000", `{"arch":"s390x"}`, hostID, sampleProfile))
	})
	c := newInventory(t, srv.URL, clients.InventoryOptions{})

	got, err := c.SystemProfile(context.Background(), hostID)
	if err != nil {
		t.Fatalf("SystemProfile: %v", err)
	}
	if !jsonEqual(t, got, []byte(sampleProfile)) {
		t.Errorf("profile = %s, want %s", got, sampleProfile)
	}
	if calls() != 1 {
		t.Errorf("server calls = %d, want 1", calls())
	}
}

func TestInventoryEscapesHostID(t *testing.T) {
	const odd = "a/b c?d#e"
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if want := "/inv/api/inventory/v1/hosts/a%2Fb%20c%3Fd%23e/system_profile"; r.RequestURI != want {
			t.Errorf("request URI = %q, want %q", r.RequestURI, want)
		}
		_, _ = io.WriteString(w, profilePage(odd, `{}`))
	})
	c := newInventory(t, srv.URL+"/inv", clients.InventoryOptions{})
	if _, err := c.SystemProfile(context.Background(), odd); err != nil {
		t.Fatalf("SystemProfile: %v", err)
	}
}

func TestInventoryNotFound(t *testing.T) {
	for name, h := range map[string]func(w http.ResponseWriter){
		"404": func(w http.ResponseWriter) {
			http.Error(w, `{"detail":"Not Found"}`, http.StatusNotFound)
		},
		"empty results": func(w http.ResponseWriter) {
			_, _ = io.WriteString(w, profilePage())
		},
		"other host only": func(w http.ResponseWriter) {
			_, _ = io.WriteString(w, profilePage("00000000-0000-0000-0000-000000000000", `{}`))
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv, calls := countingServer(t, func(w http.ResponseWriter, r *http.Request, n int) { h(w) })
			c := newInventory(t, srv.URL, clients.InventoryOptions{})

			_, err := c.SystemProfile(context.Background(), hostID)
			if !errors.Is(err, clients.ErrHostNotFound) {
				t.Fatalf("err = %v, want ErrHostNotFound", err)
			}
			wantClass(t, err, messages.ErrorClass_ERROR_CLASS_PERMANENT)
			if calls() != 1 {
				t.Errorf("server calls = %d, want 1 (no retry)", calls())
			}
		})
	}
}

func TestInventoryRetriesUnavailableThenSucceeds(t *testing.T) {
	srv, calls := countingServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, profilePage(hostID, sampleProfile))
	})
	c := newInventory(t, srv.URL, clients.InventoryOptions{})

	got, err := c.SystemProfile(context.Background(), hostID)
	if err != nil {
		t.Fatalf("SystemProfile: %v", err)
	}
	if calls() != 2 {
		t.Errorf("server calls = %d, want 2", calls())
	}
	if !jsonEqual(t, got, []byte(sampleProfile)) {
		t.Errorf("profile = %s, want %s", got, sampleProfile)
	}
}

func TestInventoryErrorClasses(t *testing.T) {
	for name, tc := range map[string]struct {
		code  int
		body  string
		class messages.ErrorClass
		calls int
	}{
		"403":           {http.StatusForbidden, "", messages.ErrorClass_ERROR_CLASS_TRANSIENT, 1},
		"500":           {http.StatusInternalServerError, "", messages.ErrorClass_ERROR_CLASS_TRANSIENT, 1},
		"503 always":    {http.StatusServiceUnavailable, "", messages.ErrorClass_ERROR_CLASS_TRANSIENT, 3},
		"not JSON":      {http.StatusOK, "<html>proxy</html>", messages.ErrorClass_ERROR_CLASS_TRANSIENT, 1},
		"null profile":  {http.StatusOK, profilePage(hostID, "null"), messages.ErrorClass_ERROR_CLASS_PERMANENT, 1},
		"wrong results": {http.StatusOK, `{"results":{}}`, messages.ErrorClass_ERROR_CLASS_TRANSIENT, 1},
	} {
		t.Run(name, func(t *testing.T) {
			srv, calls := countingServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
				w.WriteHeader(tc.code)
				_, _ = io.WriteString(w, tc.body)
			})
			c := newInventory(t, srv.URL, clients.InventoryOptions{MaxAttempts: 3})

			_, err := c.SystemProfile(context.Background(), hostID)
			wantClass(t, err, tc.class)
			if errors.Is(err, clients.ErrHostNotFound) {
				t.Errorf("err = %v, must not read as host not found", err)
			}
			if calls() != tc.calls {
				t.Errorf("server calls = %d, want %d", calls(), tc.calls)
			}
		})
	}
}

func TestInventoryRejectsDotSegmentIDs(t *testing.T) {
	srv, calls := countingServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		_, _ = io.WriteString(w, profilePage(hostID, sampleProfile))
	})
	c := newInventory(t, srv.URL, clients.InventoryOptions{})
	for _, id := range []string{"", ".", ".."} {
		_, err := c.SystemProfile(context.Background(), id)
		wantClass(t, err, messages.ErrorClass_ERROR_CLASS_PERMANENT)
	}
	if calls() != 0 {
		t.Errorf("server calls = %d, want 0", calls())
	}
}

func TestNewInventoryRejectsBadConfig(t *testing.T) {
	for _, u := range []string{"", "inventory/api", "ftp://inventory", "http://inventory/#x"} {
		if c, err := clients.NewInventory(u, clients.InventoryOptions{}); err == nil {
			c.CloseIdleConnections()
			t.Errorf("NewInventory(%q) succeeded, want an error", u)
		}
	}
	if c, err := clients.NewInventory("http://inventory", clients.InventoryOptions{MaxAttempts: -1}); err == nil {
		c.CloseIdleConnections()
		t.Error("negative MaxAttempts accepted")
	}
}
