package clients

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"", 0, false},
		{"soon", 0, false},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"0", 0, true},
		{"2", 2 * time.Second, true},
		{" 3 ", 3 * time.Second, true},
		{"99999999999999999", math.MaxInt64, true},
		{now.Add(7 * time.Second).Format(http.TimeFormat), 7 * time.Second, true},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0, true},
	} {
		got, ok := parseRetryAfter(tc.in, now)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.wantOK)
		}
	}
}

func TestBackoffIsFullJitterUnderExponentialCeiling(t *testing.T) {
	r := &retrier{cfg: retryConfig{backoffMin: 10 * time.Millisecond, backoffMax: 100 * time.Millisecond}}
	for n, ceiling := range map[int]time.Duration{
		1: 10 * time.Millisecond, 2: 20 * time.Millisecond, 3: 40 * time.Millisecond,
		4: 80 * time.Millisecond, 5: 100 * time.Millisecond, 60: 100 * time.Millisecond,
	} {
		var lo, hi time.Duration = math.MaxInt64, 0
		for range 2000 {
			d := r.backoff(n)
			if d < 0 || d > ceiling {
				t.Fatalf("backoff(%d) = %v, want within [0, %v]", n, d, ceiling)
			}
			lo, hi = min(lo, d), max(hi, d)
		}
		// Full jitter spreads over the whole range, not just its top.
		if lo > ceiling/10 || hi < ceiling*9/10 {
			t.Errorf("backoff(%d) spans [%v, %v], want most of [0, %v]", n, lo, hi, ceiling)
		}
	}
}

func TestNewRetryConfigDefaults(t *testing.T) {
	c, err := newRetryConfig(0, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := retryConfig{timeout: 10 * time.Second, maxAttempts: 5, backoffMin: 100 * time.Millisecond, backoffMax: 5 * time.Second}
	if c != want {
		t.Errorf("defaults = %+v, want %+v", c, want)
	}
}

func TestCanonicalBody(t *testing.T) {
	base := UpdatesRequest{
		PackageList:    []string{"c-1-1.noarch", "a-1-1.noarch", "b-1-1.noarch"},
		RepositoryList: []string{"r2", "r1"},
		ModulesList:    []Module{{"php", "8.1"}, {"nodejs", "20"}, {"nodejs", "18"}},
		Releasever:     "9",
	}
	body, key := canonicalBody(&base)
	const want = `{"package_list":["a-1-1.noarch","b-1-1.noarch","c-1-1.noarch"],` +
		`"repository_list":["r1","r2"],` +
		`"modules_list":[{"module_name":"nodejs","module_stream":"18"},{"module_name":"nodejs","module_stream":"20"},{"module_name":"php","module_stream":"8.1"}],` +
		`"releasever":"9","security_only":false,"latest_only":false,"third_party":false,"epoch_required":false}`
	if string(body) != want {
		t.Errorf("body =\n%s\nwant\n%s", body, want)
	}
	if base.PackageList[0] != "c-1-1.noarch" || base.ModulesList[0].Name != "php" {
		t.Errorf("canonicalBody sorted the caller's lists: %+v", base)
	}

	same := UpdatesRequest{
		PackageList:    []string{"b-1-1.noarch", "c-1-1.noarch", "a-1-1.noarch", "b-1-1.noarch"},
		RepositoryList: []string{"r1", "r2", "r1"},
		ModulesList:    []Module{{"nodejs", "18"}, {"php", "8.1"}, {"nodejs", "20"}},
		Releasever:     "9",
	}
	if _, k := canonicalBody(&same); k != key {
		t.Error("reordered, repeated lists gave another key")
	}
	other := same
	other.ThirdParty = true
	if _, k := canonicalBody(&other); k == key {
		t.Error("a different flag gave the same key")
	}

	// nil and empty lists are the same request.
	_, k1 := canonicalBody(&UpdatesRequest{PackageList: nil, RepositoryList: []string{}})
	b2, k2 := canonicalBody(&UpdatesRequest{PackageList: []string{}})
	if k1 != k2 {
		t.Error("nil and empty lists gave different keys")
	}
	if string(b2) != `{"package_list":[],"security_only":false,"latest_only":false,"third_party":false,"epoch_required":false}` {
		t.Errorf("empty request body = %s", b2)
	}
}

func TestUpdatesResponseClone(t *testing.T) {
	orig := &UpdatesResponse{
		UpdateList: map[string]PackageUpdates{
			"a": {AvailableUpdates: []Update{{Package: "a-2"}}},
			"b": {AvailableUpdates: []Update{}},
			"c": {},
		},
		RepositoryList: []string{"r1"},
		LastChange:     "t",
	}
	c := orig.Clone()
	c.UpdateList["a"].AvailableUpdates[0].Package = "changed"
	c.UpdateList["z"] = PackageUpdates{}
	c.RepositoryList[0] = "changed"
	if orig.UpdateList["a"].AvailableUpdates[0].Package != "a-2" || len(orig.UpdateList) != 3 || orig.RepositoryList[0] != "r1" {
		t.Errorf("changing the clone changed the original: %+v", orig)
	}
	if c.UpdateList["b"].AvailableUpdates == nil || c.UpdateList["c"].AvailableUpdates != nil {
		t.Error("Clone changed the nil-ness of a slice")
	}
	if (*UpdatesResponse)(nil).Clone() != nil {
		t.Error("nil.Clone() != nil")
	}

	// The clone's update slices share one array: appending to one must not
	// overwrite another's.
	orig.UpdateList["d"] = PackageUpdates{AvailableUpdates: []Update{{Package: "d-2"}, {Package: "d-3"}}}
	orig.UpdateList["e"] = PackageUpdates{AvailableUpdates: []Update{{Package: "e-2"}}}
	c = orig.Clone()
	if !reflect.DeepEqual(c, orig) {
		t.Fatalf("Clone() = %+v, want %+v", c, orig)
	}
	for k, v := range c.UpdateList {
		c.UpdateList[k] = PackageUpdates{AvailableUpdates: append(v.AvailableUpdates, Update{Package: "appended to " + k})}
	}
	for k, v := range c.UpdateList {
		if got, want := v.AvailableUpdates[:len(v.AvailableUpdates)-1], orig.UpdateList[k].AvailableUpdates; !slices.Equal(got, want) {
			t.Errorf("%s: updates %+v after appending to the others, want %+v", k, got, want)
		}
	}
}

// TestReadAnswer: the whole body whatever the announced size and the
// buffer given, errTooLarge past the cap, read errors as they come; after
// a success the reservation holds the body's need, after a failure
// nothing.
func TestReadAnswer(t *testing.T) {
	body := strings.Repeat("0123456789", 100) // 1,000 bytes
	shape := func(limit int64) answerShape { return answerShape{maxBody: limit, perByte: 4} }
	for _, c := range []struct {
		name  string
		limit int64
		size  int64
		buf   []byte
		err   error
	}{
		{"unknown size", 10_000, -1, nil, nil},
		{"announced", 10_000, 1000, nil, nil},
		{"announced too short", 10_000, 10, nil, nil},
		{"announced too long", 10_000, 5000, nil, nil},
		{"announced past the limit", 500, 1000, nil, errTooLarge},
		{"exactly the limit", 1000, -1, nil, nil},
		{"one byte past the limit", 999, -1, nil, errTooLarge},
		{"one byte past the limit, announced", 999, 999, nil, errTooLarge},
		{"small buffer", 10_000, -1, make([]byte, 3, 7), nil},
		{"large buffer with old content", 10_000, 1000, []byte(strings.Repeat("x", 2000)), nil},
	} {
		b := NewAnswerBudget(1 << 20)
		s := shape(c.limit)
		res, err := reserve(context.Background(), b, s.anticipate(max(c.size+1, int64(cap(c.buf)), 512)))
		if err != nil {
			t.Fatal(err)
		}
		got, err := readAnswer(strings.NewReader(body), c.size, c.buf, res, s)
		if !errors.Is(err, c.err) || err == nil && string(got) != body {
			t.Errorf("%s: %d bytes, %v; want the body, %v", c.name, len(got), err, c.err)
		}
		want := int64(0)
		if err == nil {
			want = s.need(got, cap(got))
		}
		if res.held != want || b.Stats().InUse != want {
			t.Errorf("%s: the reservation holds %d, the budget %d; want %d", c.name, res.held, b.Stats().InUse, want)
		}
	}
	buf := make([]byte, 0, 4096)
	res, _ := reserve(context.Background(), nil, 0)
	if got, _ := readAnswer(strings.NewReader(body), 1000, buf, res, shape(10_000)); &got[:1][0] != &buf[:1][0] {
		t.Error("a buffer large enough was not used")
	}
	b := NewAnswerBudget(1 << 20)
	res, _ = reserve(context.Background(), b, shape(10_000).anticipate(1001))
	if got, _ := readAnswer(strings.NewReader(body), 1000, buf, res, shape(10_000)); &got[:1][0] == &buf[:1][0] {
		t.Error("a buffer the reservation does not cover was used")
	}
	broken := io.MultiReader(strings.NewReader(body), iotest.ErrReader(io.ErrUnexpectedEOF))
	if _, err := readAnswer(broken, -1, nil, res, shape(10_000)); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a failing read gave %v", err)
	}
	dense := answerShape{maxBody: 10_000, perByte: 4, perValue: maxAnswerBytes / 100}
	res, _ = reserve(context.Background(), b, dense.anticipate(1001))
	if _, err := readAnswer(strings.NewReader(strings.Repeat("{}", 500)), 1000, nil, res, dense); !errors.Is(err, errTooLarge) {
		t.Errorf("an answer needing more than one answer may gave %v", err)
	}
	if n := b.Stats().InUse; n != 0 {
		t.Errorf("%d bytes still held after the failures", n)
	}
}

// An answer that needs more than it was charged, while the rest of the
// budget is taken, gives everything back and fails with what it learned
// it needs: its length when it could not be read whole, its need when it
// could not be decoded. Waiting for that much, the next attempt succeeds.
func TestReadAnswerWithoutRoom(t *testing.T) {
	body := strings.Repeat("0123456789", 1000) // 10,000 bytes
	s := answerShape{maxBody: 1 << 20, perByte: 4, perValue: 100}
	for _, c := range []struct {
		name    string
		body    string
		size    int64
		learned int64
	}{
		{"read", body, -1, s.anticipate(int64(len(body)) + 1)},
		{"decoded", strings.Repeat("{}", 5000), 10_000, s.need([]byte(strings.Repeat("{}", 5000)), 10_001)},
	} {
		b := NewAnswerBudget(1 << 20)
		first, _ := reserve(context.Background(), b, s.anticipate(max(c.size+1, 1024)))
		other, _ := reserve(context.Background(), b, b.size-first.held) // the rest
		_, err := readAnswer(strings.NewReader(c.body), c.size, nil, first, s)
		learned, ok := isNoRoom(err)
		if !ok || learned != c.learned {
			t.Errorf("%s: %v, learned %d; want no room, learned %d", c.name, err, learned, c.learned)
		}
		if first.held != 0 || b.Stats().InUse != other.held {
			t.Errorf("%s: the reservation still holds %d (the budget %d)", c.name, first.held, b.Stats().InUse)
		}
		other.release()
		next, _ := reserve(context.Background(), b, learned)
		if got, err := readAnswer(strings.NewReader(c.body), c.size, nil, next, s); err != nil || string(got) != c.body {
			t.Errorf("%s: the next attempt gave %d bytes, %v", c.name, len(got), err)
		}
		next.release()
		if n := b.Stats().InUse; n != 0 {
			t.Errorf("%s: %d bytes still held", c.name, n)
		}
	}
}
