package clients_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/patchflow/patchflow/clients"
	"github.com/patchflow/patchflow/messages"
)

// Fast retry settings so the suite runs in seconds; tests that measure waits
// override them.
const (
	testBackoffMin = time.Millisecond
	testBackoffMax = 5 * time.Millisecond
	testTimeout    = 2 * time.Second
)

// countingServer starts an httptest server (on 127.0.0.1) whose handler
// receives the 1-based number of the request, and returns it with a function
// reporting how many requests arrived. It is closed at the end of the test.
// configure, if given, adjusts the server before it starts.
func countingServer(t *testing.T, h func(w http.ResponseWriter, r *http.Request, n int), configure ...func(*http.Server)) (*httptest.Server, func() int) {
	t.Helper()
	var calls atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h(w, r, int(calls.Add(1)))
	}))
	for _, f := range configure {
		f(srv.Config)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, func() int { return int(calls.Load()) }
}

// newVMaaS returns a client of base with the fast test settings for every
// zero field, whose idle connections are closed at the end of the test.
func newVMaaS(t *testing.T, base string, opts clients.VMaaSOptions) *clients.VMaaS {
	t.Helper()
	fastDefaults(&opts.Timeout, &opts.BackoffMin, &opts.BackoffMax)
	c, err := clients.NewVMaaS(base, opts)
	if err != nil {
		t.Fatalf("NewVMaaS: %v", err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// newInventory is newVMaaS for the inventory client.
func newInventory(t *testing.T, base string, opts clients.InventoryOptions) *clients.Inventory {
	t.Helper()
	fastDefaults(&opts.Timeout, &opts.BackoffMin, &opts.BackoffMax)
	c, err := clients.NewInventory(base, opts)
	if err != nil {
		t.Fatalf("NewInventory: %v", err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// fastDefaults fills the zero timeout and backoffs with the test settings.
func fastDefaults(timeout, backoffMin, backoffMax *time.Duration) {
	if *timeout == 0 {
		*timeout = testTimeout
	}
	if *backoffMin == 0 {
		*backoffMin = testBackoffMin
	}
	if *backoffMax == 0 {
		*backoffMax = max(testBackoffMax, *backoffMin)
	}
}

// wantClass fails the test unless err has the given class.
func wantClass(t *testing.T, err error, want messages.ErrorClass) {
	t.Helper()
	if err == nil {
		t.Fatalf("err = nil, want an error of class %v", want)
	}
	if got := messages.ClassOf(err); got != want {
		t.Fatalf("class of %q = %v, want %v", err, got, want)
	}
}
