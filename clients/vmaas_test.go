package clients_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/patchflow/patchflow/clients"
	"github.com/patchflow/patchflow/messages"
)

// sampleBody is a VMaaS answer with an erratum update, a plain package
// update, and a field the client does not know.
const sampleBody = `{
  "update_list": {
    "kernel-5.14.0-1.el9.x86_64": {
      "available_updates": [
        {"package": "kernel-5.14.0-2.el9.x86_64", "package_name": "kernel", "evra": "5.14.0-2.el9.x86_64",
         "erratum": "RHSA-2024:0001", "repository": "rhel-9-baseos", "basearch": "x86_64", "releasever": "9"},
        {"package": "kernel-5.14.0-3.el9.x86_64", "package_name": "kernel", "evra": "5.14.0-3.el9.x86_64",
         "repository": "rhel-9-baseos", "basearch": "x86_64", "releasever": "9"}
      ]
    }
  },
  "repository_list": ["rhel-9-baseos"],
  "releasever": "9",
  "basearch": "x86_64",
  "last_change": "2024-01-02T03:04:05+00:00",
  "modules_list": [],
  "some_future_field": {"x": 1}
}`

// sampleResponse is sampleBody decoded.
func sampleResponse() *clients.UpdatesResponse {
	return &clients.UpdatesResponse{
		UpdateList: map[string]clients.PackageUpdates{
			"kernel-5.14.0-1.el9.x86_64": {AvailableUpdates: []clients.Update{
				{Package: "kernel-5.14.0-2.el9.x86_64", PackageName: "kernel", EVRA: "5.14.0-2.el9.x86_64",
					Erratum: "RHSA-2024:0001", Repository: "rhel-9-baseos", Basearch: "x86_64", Releasever: "9"},
				{Package: "kernel-5.14.0-3.el9.x86_64", PackageName: "kernel", EVRA: "5.14.0-3.el9.x86_64",
					Repository: "rhel-9-baseos", Basearch: "x86_64", Releasever: "9"},
			}},
		},
		RepositoryList: []string{"rhel-9-baseos"},
		Releasever:     "9",
		Basearch:       "x86_64",
		LastChange:     "2024-01-02T03:04:05+00:00",
	}
}

func sampleRequest() *clients.UpdatesRequest {
	return &clients.UpdatesRequest{
		PackageList:    []string{"kernel-5.14.0-1.el9.x86_64", "bash-5.1.8-6.el9.x86_64", "openssl-3.0.7-1.el9.x86_64"},
		RepositoryList: []string{"rhel-9-baseos", "rhel-9-appstream"},
		ModulesList:    []clients.Module{{Name: "nodejs", Stream: "18"}, {Name: "php", Stream: "8.1"}},
		Releasever:     "9",
		Basearch:       "x86_64",
		SecurityOnly:   true,
		EpochRequired:  true,
	}
}

// stall holds a request for 5s, or until the client gives up on it so that
// the test server closes promptly. The server notices a client hanging up
// only once the request body has been read, hence the drain.
func stall(r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	select {
	case <-r.Context().Done():
	case <-time.After(5 * time.Second):
	}
}

func writeSample(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, sampleBody)
}

func TestVMaaSRetriesUnavailableThenSucceeds(t *testing.T) {
	srv, calls := countingServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if r.Method != http.MethodPost || r.URL.Path != "/api/v3/updates" {
			t.Errorf("request %s %s, want POST /api/v3/updates", r.Method, r.URL.Path)
		}
		if n == 1 {
			http.Error(w, "warming up", http.StatusServiceUnavailable)
			return
		}
		writeSample(w)
	})
	c := newVMaaS(t, srv.URL, clients.VMaaSOptions{})

	got, err := c.Updates(context.Background(), sampleRequest())
	if err != nil {
		t.Fatalf("Updates: %v", err)
	}
	if calls() != 2 {
		t.Errorf("server calls = %d, want 2", calls())
	}
	if want := sampleResponse(); !reflect.DeepEqual(got, want) {
		t.Errorf("response =\n%+v\nwant\n%+v", got, want)
	}
	if s := c.Stats(); s != (clients.VMaaSStats{Calls: 1, Requests: 2, Retries: 1}) {
		t.Errorf("stats = %+v, want 1 call, 2 requests, 1 retry", s)
	}
}

func TestVMaaSRetriesRetryableStatuses(t *testing.T) {
	for _, code := range []int{http.StatusTooManyRequests, http.StatusBadGateway, http.StatusGatewayTimeout} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			srv, calls := countingServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
				if n < 3 {
					w.WriteHeader(code)
					return
				}
				writeSample(w)
			})
			c := newVMaaS(t, srv.URL, clients.VMaaSOptions{})
			if _, err := c.Updates(context.Background(), sampleRequest()); err != nil {
				t.Fatalf("Updates: %v", err)
			}
			if calls() != 3 {
				t.Errorf("server calls = %d, want 3", calls())
			}
		})
	}
}

func TestVMaaSDoesNotRetryOtherStatuses(t *testing.T) {
	for _, tc := range []struct {
		code  int
		class messages.ErrorClass
	}{
		{http.StatusBadRequest, messages.ErrorClass_ERROR_CLASS_PERMANENT},
		{http.StatusUnauthorized, messages.ErrorClass_ERROR_CLASS_TRANSIENT},
		{http.StatusNotFound, messages.ErrorClass_ERROR_CLASS_TRANSIENT},
		{http.StatusUnprocessableEntity, messages.ErrorClass_ERROR_CLASS_PERMANENT},
		{http.StatusInternalServerError, messages.ErrorClass_ERROR_CLASS_TRANSIENT},
		{http.StatusNotImplemented, messages.ErrorClass_ERROR_CLASS_TRANSIENT},
	} {
		t.Run(fmt.Sprint(tc.code), func(t *testing.T) {
			srv, calls := countingServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
				http.Error(w, "package_list: invalid nevra", tc.code)
			})
			c := newVMaaS(t, srv.URL, clients.VMaaSOptions{})

			_, err := c.Updates(context.Background(), sampleRequest())
			wantClass(t, err, tc.class)
			if calls() != 1 {
				t.Errorf("server calls = %d, want 1 (no retry)", calls())
			}
			var serr *clients.StatusError
			if !errors.As(err, &serr) || serr.StatusCode != tc.code {
				t.Fatalf("err = %v, want a StatusError with code %d", err, tc.code)
			}
			if !strings.Contains(serr.Body, "invalid nevra") {
				t.Errorf("StatusError.Body = %q, want the server's reason", serr.Body)
			}
		})
	}
}

func TestVMaaSExhaustedAttemptsAreTransient(t *testing.T) {
	srv, calls := countingServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	c := newVMaaS(t, srv.URL, clients.VMaaSOptions{MaxAttempts: 3})

	_, err := c.Updates(context.Background(), sampleRequest())
	wantClass(t, err, messages.ErrorClass_ERROR_CLASS_TRANSIENT)
	if calls() != 3 {
		t.Errorf("server calls = %d, want 3", calls())
	}
	var serr *clients.StatusError
	if !errors.As(err, &serr) || serr.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("err = %v, want the last 503 inside", err)
	}
}

func TestVMaaSConnectionRefusedIsRetriedThenTransient(t *testing.T) {
	// A port that was just listening and is now closed: connections are
	// refused at once.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	c := newVMaaS(t, "http://"+addr, clients.VMaaSOptions{MaxAttempts: 3})

	_, err = c.Updates(context.Background(), sampleRequest())
	wantClass(t, err, messages.ErrorClass_ERROR_CLASS_TRANSIENT)
	if s := c.Stats(); s.Requests != 3 {
		t.Errorf("attempts = %d, want 3", s.Requests)
	}
}

func TestVMaaSAttemptTimeout(t *testing.T) {
	srv, calls := countingServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		// Far slower than the attempt timeout.
		stall(r)
	})
	c := newVMaaS(t, srv.URL, clients.VMaaSOptions{Timeout: 50 * time.Millisecond, MaxAttempts: 3})

	start := time.Now()
	_, err := c.Updates(context.Background(), sampleRequest())
	elapsed := time.Since(start)

	wantClass(t, err, messages.ErrorClass_ERROR_CLASS_TRANSIENT)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("err = %v, want an attempt timeout", err)
	}
	if calls() != 3 {
		t.Errorf("server calls = %d, want 3", calls())
	}
	// 3 attempts of 50ms plus tiny backoffs; 5s would mean no timeout.
	if elapsed < 150*time.Millisecond || elapsed > time.Second {
		t.Errorf("elapsed = %v, want about 3 × 50ms", elapsed)
	}
}

func TestVMaaSStalledBodyHitsAttemptTimeout(t *testing.T) {
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		// Headers and half a body, then nothing: only a deadline that
		// covers reading the body gets the client out.
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, sampleBody[:len(sampleBody)/2])
		w.(http.Flusher).Flush()
		stall(r)
	})
	c := newVMaaS(t, srv.URL, clients.VMaaSOptions{Timeout: 50 * time.Millisecond, MaxAttempts: 2})

	start := time.Now()
	_, err := c.Updates(context.Background(), sampleRequest())
	wantClass(t, err, messages.ErrorClass_ERROR_CLASS_TRANSIENT)
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Errorf("elapsed = %v, want about 2 × 50ms", elapsed)
	}
}

func TestVMaaSCancelStopsRetryWait(t *testing.T) {
	firstAnswered := make(chan struct{})
	srv, calls := countingServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		// A long Retry-After puts the client in a 10s wait.
		w.Header().Set("Retry-After", "10")
		w.WriteHeader(http.StatusServiceUnavailable)
		if n == 1 {
			close(firstAnswered)
		}
	})
	c := newVMaaS(t, srv.URL, clients.VMaaSOptions{BackoffMax: 10 * time.Second})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-firstAnswered
		time.Sleep(20 * time.Millisecond) // let the client enter its wait
		cancel()
	}()
	start := time.Now()
	_, err := c.Updates(ctx, sampleRequest())
	elapsed := time.Since(start)

	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	wantClass(t, err, messages.ErrorClass_ERROR_CLASS_CANCELLED)
	if calls() != 1 {
		t.Errorf("server calls = %d, want 1", calls())
	}
	if elapsed > time.Second {
		t.Errorf("elapsed = %v: the retry wait ignored the cancellation", elapsed)
	}
}

func TestVMaaSCancelStopsAttempt(t *testing.T) {
	arrived := make(chan struct{}, 1)
	srv, calls := countingServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		arrived <- struct{}{}
		stall(r)
	})
	// One attempt: cancelling the last attempt must still read as cancelled,
	// not as attempts exhausted.
	c := newVMaaS(t, srv.URL, clients.VMaaSOptions{Timeout: 10 * time.Second, MaxAttempts: 1})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-arrived
		cancel()
	}()
	start := time.Now()
	_, err := c.Updates(ctx, sampleRequest())

	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	wantClass(t, err, messages.ErrorClass_ERROR_CLASS_CANCELLED)
	if calls() != 1 {
		t.Errorf("server calls = %d, want 1", calls())
	}
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Errorf("elapsed = %v: the attempt ignored the cancellation", elapsed)
	}
}

func TestVMaaSHonoursRetryAfter(t *testing.T) {
	srv, calls := countingServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		writeSample(w)
	})
	// Without Retry-After the wait would be at most 1ms; with it, 1s capped
	// at BackoffMax = 300ms.
	c := newVMaaS(t, srv.URL, clients.VMaaSOptions{BackoffMin: time.Millisecond, BackoffMax: 300 * time.Millisecond})

	start := time.Now()
	if _, err := c.Updates(context.Background(), sampleRequest()); err != nil {
		t.Fatalf("Updates: %v", err)
	}
	elapsed := time.Since(start)
	if calls() != 2 {
		t.Errorf("server calls = %d, want 2", calls())
	}
	if elapsed < 290*time.Millisecond {
		t.Errorf("elapsed = %v: Retry-After was not honoured", elapsed)
	}
	if elapsed > 900*time.Millisecond {
		t.Errorf("elapsed = %v: Retry-After was not capped at BackoffMax", elapsed)
	}
}

func TestVMaaSDecodesGzipResponse(t *testing.T) {
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			t.Errorf("Accept-Encoding = %q, want gzip offered", r.Header.Get("Accept-Encoding"))
		}
		// Compressed whatever was asked: the client must decode it.
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		_, _ = io.WriteString(zw, sampleBody)
		_ = zw.Close()
	})
	c := newVMaaS(t, srv.URL, clients.VMaaSOptions{})

	got, err := c.Updates(context.Background(), sampleRequest())
	if err != nil {
		t.Fatalf("Updates: %v", err)
	}
	if want := sampleResponse(); !reflect.DeepEqual(got, want) {
		t.Errorf("response =\n%+v\nwant\n%+v", got, want)
	}
}

func TestVMaaSInvalidJSONIsTransient(t *testing.T) {
	for name, body := range map[string]string{
		"html page":        "<html><body>502 Bad Gateway</body></html>",
		"truncated":        sampleBody[:40],
		"wrong type":       `{"update_list": [1, 2]}`,
		"null":             `null`,
		"no update_list":   `{"repository_list": []}`,
		"empty body (200)": ``,
	} {
		t.Run(name, func(t *testing.T) {
			srv, calls := countingServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
				_, _ = io.WriteString(w, body)
			})
			c := newVMaaS(t, srv.URL, clients.VMaaSOptions{CacheSize: 8})

			_, err := c.Updates(context.Background(), sampleRequest())
			wantClass(t, err, messages.ErrorClass_ERROR_CLASS_TRANSIENT)
			if calls() != 1 {
				t.Errorf("server calls = %d, want 1", calls())
			}
			// A bad answer must not be cached.
			_, err = c.Updates(context.Background(), sampleRequest())
			wantClass(t, err, messages.ErrorClass_ERROR_CLASS_TRANSIENT)
			if calls() != 2 {
				t.Errorf("server calls = %d, want 2: the bad answer was cached", calls())
			}
		})
	}
}

func TestVMaaSSendsCanonicalJSON(t *testing.T) {
	var got map[string]any
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if ct := r.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type = %q", ct)
		}
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			t.Errorf("decoding request: %v", err)
		}
		writeSample(w)
	})
	c := newVMaaS(t, srv.URL, clients.VMaaSOptions{})

	req := &clients.UpdatesRequest{
		PackageList:   []string{"b-1-1.x86_64", "a-1-1.x86_64", "b-1-1.x86_64"},
		ModulesList:   []clients.Module{{Name: "php", Stream: "8.1"}, {Name: "nodejs", Stream: "18"}},
		Basearch:      "x86_64",
		SecurityOnly:  true,
		EpochRequired: true,
	}
	if _, err := c.Updates(context.Background(), req); err != nil {
		t.Fatalf("Updates: %v", err)
	}
	want := map[string]any{
		"package_list": []any{"a-1-1.x86_64", "b-1-1.x86_64"},
		"modules_list": []any{
			map[string]any{"module_name": "nodejs", "module_stream": "18"},
			map[string]any{"module_name": "php", "module_stream": "8.1"},
		},
		"basearch":       "x86_64",
		"security_only":  true,
		"latest_only":    false,
		"third_party":    false,
		"epoch_required": true,
		// repository_list and releasever are absent: empty means "no
		// filter", which VMaaS spells by leaving them out.
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("request body =\n%v\nwant\n%v", got, want)
	}
	if !slices.Equal(req.PackageList, []string{"b-1-1.x86_64", "a-1-1.x86_64", "b-1-1.x86_64"}) {
		t.Errorf("caller's package list changed to %v", req.PackageList)
	}
}

func TestVMaaSCache(t *testing.T) {
	srv, calls := countingServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		writeSample(w)
	})
	c := newVMaaS(t, srv.URL, clients.VMaaSOptions{CacheSize: 16})
	ctx := context.Background()

	first, err := c.Updates(ctx, sampleRequest())
	if err != nil {
		t.Fatalf("Updates: %v", err)
	}
	// The caller owns its answer: scribbling on it must not reach the
	// cache.
	first.UpdateList["kernel-5.14.0-1.el9.x86_64"].AvailableUpdates[0].Erratum = "scribbled"
	delete(first.UpdateList, "kernel-5.14.0-1.el9.x86_64")
	first.RepositoryList[0] = "scribbled"

	shuffled := sampleRequest()
	slices.Reverse(shuffled.PackageList)
	shuffled.PackageList = append(shuffled.PackageList, shuffled.PackageList[0])
	slices.Reverse(shuffled.RepositoryList)
	slices.Reverse(shuffled.ModulesList)
	second, err := c.Updates(ctx, shuffled)
	if err != nil {
		t.Fatalf("Updates: %v", err)
	}
	if calls() != 1 {
		t.Errorf("server calls = %d, want 1: the shuffled request missed the cache", calls())
	}
	if want := sampleResponse(); !reflect.DeepEqual(second, want) {
		t.Errorf("cached response =\n%+v\nwant\n%+v (changed through the first caller's copy?)", second, want)
	}
	// A hit hands out a copy too.
	second.RepositoryList[0] = "scribbled"
	third, err := c.Updates(ctx, sampleRequest())
	if err != nil {
		t.Fatalf("Updates: %v", err)
	}
	if third.RepositoryList[0] != "rhel-9-baseos" {
		t.Errorf("cache entry changed through a hit's copy: %v", third.RepositoryList)
	}

	for name, mutate := range map[string]func(*clients.UpdatesRequest){
		"other package":  func(r *clients.UpdatesRequest) { r.PackageList[0] = "kernel-5.14.0-9.el9.x86_64" },
		"fewer repos":    func(r *clients.UpdatesRequest) { r.RepositoryList = r.RepositoryList[:1] },
		"other basearch": func(r *clients.UpdatesRequest) { r.Basearch = "aarch64" },
		"latest only":    func(r *clients.UpdatesRequest) { r.LatestOnly = true },
		"other stream":   func(r *clients.UpdatesRequest) { r.ModulesList[0].Stream = "20" },
	} {
		before := calls()
		req := sampleRequest()
		mutate(req)
		if _, err := c.Updates(ctx, req); err != nil {
			t.Fatalf("%s: Updates: %v", name, err)
		}
		if calls() != before+1 {
			t.Errorf("%s: server calls = %d, want %d: a different request hit the cache", name, calls(), before+1)
		}
	}
	if s := c.Stats(); s.CacheHits != 2 || s.Calls != 8 || s.Requests != 6 {
		t.Errorf("stats = %+v, want 8 calls, 2 hits, 6 requests", s)
	}
}

func TestVMaaSWithoutCacheAlwaysAsks(t *testing.T) {
	srv, calls := countingServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		writeSample(w)
	})
	c := newVMaaS(t, srv.URL, clients.VMaaSOptions{})
	for range 2 {
		if _, err := c.Updates(context.Background(), sampleRequest()); err != nil {
			t.Fatalf("Updates: %v", err)
		}
	}
	if calls() != 2 {
		t.Errorf("server calls = %d, want 2", calls())
	}
}

func TestVMaaSReusesConnections(t *testing.T) {
	var newConns atomic.Int64
	// Error answers carry a body far larger than what the client reads for
	// its error message: only draining it lets the connection be reused.
	bigError := bytes.Repeat([]byte("x"), 64<<10)
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		switch n % 3 {
		case 0:
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write(bigError)
		case 1:
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write(bigError)
		default:
			writeSample(w)
		}
	}, func(s *http.Server) {
		s.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				newConns.Add(1)
			}
		}
	})
	c := newVMaaS(t, srv.URL, clients.VMaaSOptions{MaxAttempts: 1})

	const n = 30
	for i := range n {
		req := sampleRequest()
		req.PackageList = append(req.PackageList, fmt.Sprintf("pkg-%d-1.x86_64", i))
		_, _ = c.Updates(context.Background(), req)
	}
	if s := c.Stats(); s.Requests != n {
		t.Fatalf("requests = %d, want %d", s.Requests, n)
	}
	if got := newConns.Load(); got > 2 {
		t.Errorf("%d connections for %d sequential calls, want 1 or 2: bodies are not drained", got, n)
	}
}

func TestNewVMaaSRejectsBadConfig(t *testing.T) {
	for name, tc := range map[string]struct {
		url  string
		opts clients.VMaaSOptions
	}{
		"empty url":        {url: ""},
		"relative url":     {url: "vmaas:8000/api"},
		"no host":          {url: "http:///api"},
		"other scheme":     {url: "ftp://vmaas"},
		"query":            {url: "http://vmaas/?x=1"},
		"unparsable":       {url: "http://[::1"},
		"negative timeout": {url: "http://vmaas", opts: clients.VMaaSOptions{Timeout: -1}},
		"negative cache":   {url: "http://vmaas", opts: clients.VMaaSOptions{CacheSize: -1}},
		"max below min": {url: "http://vmaas", opts: clients.VMaaSOptions{
			BackoffMin: time.Second, BackoffMax: time.Millisecond}},
	} {
		if c, err := clients.NewVMaaS(tc.url, tc.opts); err == nil {
			c.CloseIdleConnections()
			t.Errorf("%s: NewVMaaS(%q) succeeded, want an error", name, tc.url)
		}
	}
	c, err := clients.NewVMaaS("https://vmaas.example:8443/prefix/", clients.VMaaSOptions{})
	if err != nil {
		t.Fatalf("valid config rejected: %v", err)
	}
	c.CloseIdleConnections()
}

func TestVMaaSBasePathPrefix(t *testing.T) {
	srv, calls := countingServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if r.URL.Path != "/vmaas/api/v3/updates" {
			t.Errorf("path = %q, want /vmaas/api/v3/updates", r.URL.Path)
		}
		writeSample(w)
	})
	c := newVMaaS(t, srv.URL+"/vmaas/", clients.VMaaSOptions{})
	if _, err := c.Updates(context.Background(), sampleRequest()); err != nil {
		t.Fatalf("Updates: %v", err)
	}
	if calls() != 1 {
		t.Errorf("server calls = %d, want 1", calls())
	}
}

func TestVMaaSNilRequestIsPermanent(t *testing.T) {
	srv, calls := countingServer(t, func(w http.ResponseWriter, r *http.Request, n int) { writeSample(w) })
	c := newVMaaS(t, srv.URL, clients.VMaaSOptions{})
	_, err := c.Updates(context.Background(), nil)
	wantClass(t, err, messages.ErrorClass_ERROR_CLASS_PERMANENT)
	if calls() != 0 {
		t.Errorf("server calls = %d, want 0", calls())
	}
}

func TestVMaaSConcurrentCallsWithCache(t *testing.T) {
	srv, calls := countingServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		writeSample(w)
	})
	c := newVMaaS(t, srv.URL, clients.VMaaSOptions{CacheSize: 4})
	request := func(i int) *clients.UpdatesRequest {
		req := sampleRequest()
		if i%2 == 1 {
			slices.Reverse(req.PackageList)
		}
		req.Basearch = fmt.Sprint(i % 4)
		return req
	}
	for i := range 4 { // warm the cache so the concurrent calls below hit
		if _, err := c.Updates(context.Background(), request(i)); err != nil {
			t.Fatalf("Updates: %v", err)
		}
	}

	// Every caller scribbles on its answer; with -race this fails if two
	// callers, or a caller and the cache, share memory.
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			resp, err := c.Updates(context.Background(), request(i))
			if err != nil {
				t.Errorf("Updates: %v", err)
				return
			}
			for k, v := range resp.UpdateList {
				v.AvailableUpdates[0].Erratum = fmt.Sprint(i)
				delete(resp.UpdateList, k)
			}
		})
	}
	wg.Wait()
	if s := c.Stats(); s.Calls != 68 || s.CacheHits != 64 || calls() != 4 {
		t.Errorf("stats = %+v, server calls %d; want 68 calls, 64 hits, 4 requests", s, calls())
	}
}

// Every HTTP attempt reports whether VMaaS served it; answers from the cache
// are not calls and report nothing, so cache hits cannot make an outage look
// like a healthy VMaaS.
func TestVMaaSReportsEachAttemptNotCacheHits(t *testing.T) {
	var down atomic.Bool
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if down.Load() {
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
			return
		}
		writeSample(w)
	})
	c := newVMaaS(t, srv.URL, clients.VMaaSOptions{CacheSize: 10, MaxAttempts: 2})
	var served, failed atomic.Int64
	c.ReportTo(func(_ context.Context, _ time.Duration, err error) {
		if err == nil || messages.ClassOf(err) == messages.ErrorClass_ERROR_CLASS_PERMANENT {
			served.Add(1)
		} else {
			failed.Add(1)
		}
	})
	if _, err := c.Updates(context.Background(), sampleRequest()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Updates(context.Background(), sampleRequest()); err != nil { // from the cache
		t.Fatal(err)
	}
	if served.Load() != 1 || failed.Load() != 0 {
		t.Fatalf("after one call and one cache hit: %d served, %d failed reported; want 1, 0", served.Load(), failed.Load())
	}
	down.Store(true)
	other := sampleRequest()
	other.PackageList = append(other.PackageList, "zsh-5.8-9.el9.x86_64")
	if _, err := c.Updates(context.Background(), other); err == nil {
		t.Fatal("a 503 answered as success")
	}
	if _, err := c.Updates(context.Background(), sampleRequest()); err != nil { // still cached
		t.Fatal(err)
	}
	if served.Load() != 1 || failed.Load() != 2 {
		t.Fatalf("during the outage: %d served, %d failed reported; want 1 and 2 (both attempts of the miss)", served.Load(), failed.Load())
	}
}

// TestVMaaSAnswersOutliveTheirBody: the buffer an answer is read into
// serves the next calls; the answers decoded from it must not change.
func TestVMaaSAnswersOutliveTheirBody(t *testing.T) {
	other := strings.NewReplacer("kernel", "KERNEL", "RHSA", "RHBA", "rhel-9", "RHEL-9", "2024", "2025").Replace(sampleBody)
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		_, _ = io.WriteString(w, []string{sampleBody, other}[n%2])
	})
	c := newVMaaS(t, srv.URL, clients.VMaaSOptions{})
	var answers []*clients.UpdatesResponse
	for range 6 {
		resp, err := c.Updates(context.Background(), sampleRequest())
		if err != nil {
			t.Fatal(err)
		}
		answers = append(answers, resp)
	}
	var wantOther clients.UpdatesResponse
	if err := json.Unmarshal([]byte(other), &wantOther); err != nil {
		t.Fatal(err)
	}
	for i, got := range answers {
		want := &wantOther
		if i%2 == 1 {
			want = sampleResponse()
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("answer %d changed after later calls:\n%+v\nwant\n%+v", i, got, want)
		}
	}
}
