package clients_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/patchflow/patchflow/clients"
	"github.com/patchflow/patchflow/messages"
)

// statusCase is one answer of a dependency and what the client must make of
// it: the class of its error, how many attempts the call makes (1: returned
// at once; attempts: retried within the call), and whether each attempt is
// reported as served (a refusal of the request: the service is up).
type statusCase struct {
	name   string
	code   int
	body   string
	header http.Header
	class  messages.ErrorClass
	calls  int
	served bool
}

const attempts = 3

// capBytes is the larger of the clients' caps on a body (VMaaS's; the
// inventory's is 4 MiB).
const capBytes = 16 << 20

// overTheCap announces a body one byte over the cap, which the server then
// sends (as far as the client reads it).
var overTheCap = http.Header{"Content-Length": {strconv.Itoa(capBytes + 1)}}

// statusCases are the answers whose blame is the same for both clients:
// only what says the request is wrong for this record is permanent; every
// status that says the dependency, or what stands before it, is wrong is
// transient (the pipeline judges it), retried within the call only when
// another attempt soon may pass.
func statusCases() []statusCase {
	dep := messages.ErrorClass_ERROR_CLASS_TRANSIENT
	perm := messages.ErrorClass_ERROR_CLASS_PERMANENT
	return []statusCase{
		{name: "400", code: 400, body: "package_list: invalid nevra", class: perm, calls: 1, served: true},
		{name: "401", code: 401, body: "unauthorized", class: dep, calls: 1},
		{name: "403", code: 403, body: "forbidden", class: dep, calls: 1},
		{name: "405", code: 405, body: "method not allowed", class: dep, calls: 1},
		{name: "408", code: 408, body: "request timeout", class: dep, calls: attempts},
		{name: "413", code: 413, body: "request entity too large", class: dep, calls: 1},
		{name: "418", code: 418, body: "I'm a teapot", class: dep, calls: 1},
		{name: "422 naming nothing", code: 422, body: "unprocessable entity", class: dep, calls: 1},
		{name: "429", code: 429, body: "slow down", class: dep, calls: attempts},
		{name: "500", code: 500, body: "internal server error", class: dep, calls: 1},
		{name: "501", code: 501, body: "not implemented", class: dep, calls: 1},
		{name: "502", code: 502, body: "bad gateway", class: dep, calls: attempts},
		{name: "503", code: 503, body: "unavailable", class: dep, calls: attempts},
		{name: "504", code: 504, body: "gateway timeout", class: dep, calls: attempts},
		{name: "200 over the cap", code: 200, header: overTheCap, class: dep, calls: 1},
	}
}

// callFunc makes one call of a client to base, reporting each attempt's
// outcome as consumer.DependencyReporter reads it to report.
type callFunc func(t *testing.T, base string, report func(context.Context, time.Duration, error)) error

func vmaasCall(t *testing.T, base string, report func(context.Context, time.Duration, error)) error {
	c := newVMaaS(t, base, clients.VMaaSOptions{MaxAttempts: attempts})
	c.ReportTo(report)
	_, err := c.Updates(context.Background(), sampleRequest())
	return err
}

func inventoryCall(t *testing.T, base string, report func(context.Context, time.Duration, error)) error {
	c := newInventory(t, base, clients.InventoryOptions{MaxAttempts: attempts})
	c.ReportTo(report)
	_, err := c.SystemProfile(context.Background(), hostID)
	return err
}

// Whose failure each answer is, for each client: its class, its dependency's
// name, the attempts it takes and how each is reported.
func TestWhoseFailureEachStatusIs(t *testing.T) {
	vmaas := append(statusCases(),
		statusCase{name: "404 on the endpoint", code: 404, body: "404 page not found", class: messages.ErrorClass_ERROR_CLASS_TRANSIENT, calls: 1},
		statusCase{name: "422 naming the input", code: 422, body: `{"detail": "'package_list' is a required property"}`,
			class: messages.ErrorClass_ERROR_CLASS_PERMANENT, calls: 1, served: true},
	)
	inventory := append(statusCases(),
		// The inventory's answer for a host it does not know: the host is
		// gone, and the inventory is up.
		statusCase{name: "404 host not found", code: 404, body: `{"detail":"Not Found"}`, class: messages.ErrorClass_ERROR_CLASS_PERMANENT, calls: 1, served: true},
		// A GET names nothing of the record but its host id, in the path.
		statusCase{name: "422 naming a field", code: 422, body: `{"detail": "'package_list' is a required property"}`, class: messages.ErrorClass_ERROR_CLASS_TRANSIENT, calls: 1},
	)
	for _, client := range []struct {
		dependency string
		call       callFunc
		cases      []statusCase
	}{
		{clients.DependencyVMaaS, vmaasCall, vmaas},
		{clients.DependencyInventory, inventoryCall, inventory},
	} {
		for _, tc := range client.cases {
			t.Run(client.dependency+"/"+tc.name, func(t *testing.T) {
				checkStatus(t, client.dependency, client.call, tc)
			})
		}
	}
}

func checkStatus(t *testing.T, dependency string, call callFunc, tc statusCase) {
	srv, calls := countingServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		for k, v := range tc.header {
			w.Header()[k] = v
		}
		w.WriteHeader(tc.code)
		if tc.header.Get("Content-Length") == "" {
			_, _ = io.WriteString(w, tc.body)
			return
		}
		chunk := make([]byte, 1<<20)
		for left := capBytes + 1; left > 0; left -= len(chunk) {
			if _, err := w.Write(chunk[:min(left, len(chunk))]); err != nil {
				return // the client hung up
			}
		}
	})
	var mu sync.Mutex
	var reported []error
	err := call(t, srv.URL, func(_ context.Context, _ time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		reported = append(reported, err)
	})
	if got := messages.ClassOf(err); got != tc.class {
		t.Fatalf("class of %q = %v, want %v", err, got, tc.class)
	}
	if got := messages.DependencyOf(err); got != dependency {
		t.Errorf("dependency named %q, want %q", got, dependency)
	}
	if calls() != tc.calls {
		t.Errorf("server calls = %d, want %d", calls(), tc.calls)
	}
	var serr *clients.StatusError
	if tc.code != http.StatusOK && (!errors.As(err, &serr) || serr.StatusCode != tc.code) {
		t.Errorf("err = %v, want a StatusError of %d", err, tc.code)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reported) != tc.calls {
		t.Fatalf("%d attempts reported, want %d", len(reported), tc.calls)
	}
	for i, r := range reported {
		if served := messages.ClassOf(r) == messages.ErrorClass_ERROR_CLASS_PERMANENT; r == nil || served != tc.served {
			t.Errorf("attempt %d reported as %v (class %v), want served (a refusal): %v", i+1, r, messages.ClassOf(r), tc.served)
		}
	}
}

// For any status from 400 to 599 and any body, a call fails permanently
// (the record's own failure, dead-lettered at once) only when the answer
// says the request is wrong: a 400; a 422 whose body names a field the
// request sent; the inventory's 404 (no such host). Every other status is
// the dependency's: transient, retried within the call for 408, 429, 502,
// 503 and 504, returned at once otherwise.
func TestBlameOfEveryStatus(t *testing.T) {
	var code atomic.Int64
	var body atomic.Value
	var sent atomic.Value
	srv, calls := countingServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			sent.Store(b)
		}
		w.WriteHeader(int(code.Load()))
		_, _ = io.WriteString(w, body.Load().(string))
	})
	vm := newVMaaS(t, srv.URL, clients.VMaaSOptions{MaxAttempts: attempts})
	inv := newInventory(t, srv.URL, clients.InventoryOptions{MaxAttempts: attempts})

	// The fields the request sends, as VMaaS reads them.
	code.Store(http.StatusBadRequest)
	body.Store("")
	_, _ = vm.Updates(context.Background(), sampleRequest())
	var req map[string]json.RawMessage
	var modules []map[string]json.RawMessage
	if err := json.Unmarshal(sent.Load().([]byte), &req); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(req["modules_list"], &modules); err != nil || len(modules) == 0 {
		t.Fatalf("modules_list %s: %v", req["modules_list"], err)
	}
	fields := slices.Collect(maps.Keys(req))
	fields = slices.AppendSeq(fields, maps.Keys(modules[0]))

	rapid.Check(t, func(rt *rapid.T) {
		dependency := rapid.SampledFrom([]string{clients.DependencyVMaaS, clients.DependencyInventory}).Draw(rt, "dependency")
		c := rapid.IntRange(400, 599).Draw(rt, "code")
		b := rapid.StringMatching(`[ -~]{0,40}`).Draw(rt, "body")
		if rapid.Bool().Draw(rt, "name a field") {
			b += rapid.SampledFrom(fields).Draw(rt, "field") + ": invalid"
		}
		code.Store(int64(c))
		body.Store(b)
		before := calls()

		var err error
		named := false
		if dependency == clients.DependencyVMaaS {
			_, err = vm.Updates(context.Background(), sampleRequest())
			named = slices.ContainsFunc(fields, func(f string) bool { return strings.Contains(b, f) })
		} else {
			_, err = inv.SystemProfile(context.Background(), hostID)
		}

		wantClass, wantCalls := messages.ErrorClass_ERROR_CLASS_TRANSIENT, 1
		switch {
		case c == http.StatusBadRequest, c == http.StatusUnprocessableEntity && named,
			c == http.StatusNotFound && dependency == clients.DependencyInventory:
			wantClass = messages.ErrorClass_ERROR_CLASS_PERMANENT
		case slices.Contains([]int{408, 429, 502, 503, 504}, c):
			wantCalls = attempts
		}
		if got := messages.ClassOf(err); got != wantClass {
			rt.Fatalf("%s answering %d %q: class of %q = %v, want %v", dependency, c, b, err, got, wantClass)
		}
		if got := messages.DependencyOf(err); got != dependency {
			rt.Fatalf("dependency named %q, want %q", got, dependency)
		}
		if n := calls() - before; n != wantCalls {
			rt.Fatalf("%s answering %d: %d attempts, want %d", dependency, c, n, wantCalls)
		}
	})
}
