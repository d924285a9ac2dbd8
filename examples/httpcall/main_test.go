package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"google.golang.org/protobuf/proto"

	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/messages"
	"github.com/patchflow/patchflow/proving/embedded"
	"github.com/patchflow/patchflow/proving/offsets"
)

// The example against the in-process broker and a test HTTP service: every
// record reaches the service once, each key's records in offset order and
// never two at once; the record the service refuses is in the dead-letter
// topic the consumer created; every partition is committed to its end,
// and Run returns nil once ctx is done.
func TestExampleKeepsKeyOrderDeadLettersThePoisonAndCommits(t *testing.T) {
	broker, err := embedded.Start(4, "events")
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	const keys, perKey = 10, 20
	var kv []string
	for i := range perKey {
		for k := range keys {
			v := strconv.Itoa(i)
			if k == 4 && i == 9 {
				v = "poison"
			}
			kv = append(kv, fmt.Sprint("host-", k), v)
		}
	}
	if err := broker.Produce("events", kv...); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	got := map[string][]string{}
	busy := map[string]bool{}
	overlaps := 0
	service := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("X-Record-Key")
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		if busy[key] {
			overlaps++
		}
		busy[key] = true
		mu.Unlock()
		time.Sleep(2 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		busy[key] = false
		if string(body) == "poison" {
			http.Error(w, "not a number", http.StatusBadRequest)
			return
		}
		got[key] = append(got[key], string(body))
	}))
	defer service.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	cfg := consumer.Config{Brokers: broker.Addrs(), Topic: "events", Group: "httpcall-example"}
	go func() { done <- run(ctx, cfg, service.URL) }()
	deadline := time.Now().Add(30 * time.Second)
	for !committedToEnd(broker.Addrs()) {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("not committed to the end within 30 s (run: %v)", <-done)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}

	mu.Lock()
	defer mu.Unlock()
	if overlaps > 0 {
		t.Errorf("%d calls ran beside another of their key", overlaps)
	}
	for k := range keys {
		key := fmt.Sprint("host-", k)
		var want []string
		for i := range perKey {
			if k != 4 || i != 9 {
				want = append(want, strconv.Itoa(i))
			}
		}
		if strings.Join(got[key], ",") != strings.Join(want, ",") {
			t.Errorf("%s: the service saw %v, want %v", key, got[key], want)
		}
	}
	letter := deadLetter(t, broker.Addrs(), "events.dlq")
	if string(letter.GetKey()) != "host-4" || string(letter.GetValue()) != "poison" || !strings.Contains(letter.GetError(), "400") {
		t.Errorf("dead letter: key %q value %q error %q; want the poison record of host-4 with the service's refusal",
			letter.GetKey(), letter.GetValue(), letter.GetError())
	}
}

// committedToEnd reports whether the example's group has committed every
// partition of events to its end.
func committedToEnd(brokers []string) bool {
	p, err := offsets.Read(brokers, "events", "httpcall-example")
	if err != nil || len(p.Ends) == 0 {
		return false
	}
	for part, end := range p.Ends {
		if p.Committed[part] != end {
			return false
		}
	}
	return true
}

// deadLetter reads the first envelope of topic's partitions.
func deadLetter(t *testing.T, brokers []string, topic string) *messages.DeadLetter {
	t.Helper()
	c, err := sarama.NewConsumer(brokers, sarama.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	parts, err := c.Partitions(topic)
	if err != nil {
		t.Fatalf("dead-letter topic %s: %v", topic, err)
	}
	for _, p := range parts {
		pc, err := c.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-pc.Messages():
			pc.Close()
			var d messages.DeadLetter
			if err := proto.Unmarshal(m.Value, &d); err != nil {
				t.Fatal(err)
			}
			return &d
		case <-time.After(500 * time.Millisecond):
			pc.Close()
		}
	}
	t.Fatalf("no dead letter on %s", topic)
	return nil
}
