package consumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/proving/embedded"
)

// freeAddr returns a 127.0.0.1 address nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// A record alone on its topic whose failures nothing can judge (no other
// record, no health check) is held, reported in Partitions, and never
// dead-lettered; an operator with the token releases it over HTTP, and it
// is dead-lettered with the reason "released". Consumer.Release answers for
// a record that is not failing.
func TestAHeldRecordIsReleasedByAnOperator(t *testing.T) {
	broker, err := embedded.Start(1, "events")
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	const token = "operator-token-for-the-test"
	addr := freeAddr(t)
	h := consumer.HandlerFunc(func(ctx context.Context, r *consumer.Record) error {
		if string(r.Value) == "stuck" {
			return consumer.FailedIn("svc", errors.New("svc: 503"))
		}
		return nil
	})
	c, err := consumer.New(consumer.Config{Brokers: broker.Addrs(), Topic: "events", Group: "release",
		BackoffMin: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond, EvidenceWindow: 100 * time.Millisecond}, h,
		consumer.WithHTTP(addr), consumer.WithRelease(token))
	if err != nil {
		t.Fatal(err)
	}
	stop := run(c)
	defer func() { _ = stop() }()
	produce(t, broker.Addrs(), "events", []string{"k"}, []string{"stuck"})
	waitFor(t, "the record held", 10*time.Second, func() bool {
		ps := c.Partitions()
		return len(ps) == 1 && ps[0].Held == 1
	})
	if s := c.Stats(); s.DeadLettered != 0 {
		t.Fatalf("dead-lettered %d with nothing to judge by", s.DeadLettered)
	}
	post := func(auth string, offset int64) (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("http://%s/records/release?topic=events&partition=0&offset=%d", addr, offset), nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}
	if code, _ := post("", 0); code != http.StatusUnauthorized {
		t.Fatalf("a release without the token: %d, want 401", code)
	}
	if code, body := post("Bearer "+token, 0); code != http.StatusOK || body["released"] != true {
		t.Fatalf("the release: %d %v, want 200 released", code, body)
	}
	waitFor(t, "the released record dead-lettered", 10*time.Second, func() bool { return c.Stats().DeadLetteredByReason["released"] == 1 })
	produce(t, broker.Addrs(), "events", []string{"k2"}, []string{"fine"})
	waitFor(t, "the next record handled", 10*time.Second, func() bool { return c.Stats().Succeeded == 1 })
	if released, status, err := c.Release("events", 0, 1); err != nil || released {
		t.Fatalf("releasing a record that did not fail: released %v, %q, %v", released, status, err)
	}
	if _, _, err := c.Release("events", 7, 0); !errors.Is(err, consumer.ErrNotClaimed) {
		t.Fatalf("releasing on a partition not claimed here: %v, want ErrNotClaimed", err)
	}
}

func TestWithReleaseRefusesAShortToken(t *testing.T) {
	_, err := consumer.New(consumer.Config{Brokers: []string{"127.0.0.1:1"}, Topic: "events", Group: "g"},
		consumer.HandlerFunc(func(context.Context, *consumer.Record) error { return nil }), consumer.WithRelease("short"))
	if err == nil {
		t.Fatal("a 5-character token accepted")
	}
}
