package consumer

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
)

type observingHandler struct {
	mu       sync.Mutex
	calls    []string // the failure of each call
	values   []string
	dlqEnds  []int64 // the dead-letter topic's end offset at each call
	client   sarama.Client
	failures int // calls to fail before one succeeds
}

func (h *observingHandler) Handle(_ context.Context, r *Record) error {
	if string(r.Value) == "poison" {
		return Permanent(errors.New("not a number"))
	}
	return nil
}

func (h *observingHandler) DeadLettered(_ context.Context, r *Record, failure string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	end, err := h.client.GetOffset("events.dlq", 0, sarama.OffsetNewest)
	if err != nil {
		end = -1 // the topic is created at start; -1 would fail the check below
	}
	h.calls, h.values, h.dlqEnds = append(h.calls, failure), append(h.values, string(r.Value)), append(h.dlqEnds, end)
	if h.failures > 0 {
		h.failures--
		return errors.New("the observer's store is down")
	}
	return nil
}

// A handler that observes dead letters is told of each before it is
// written, with the record and the failure; its failure is retried, and
// the dead letter waits for it.
func TestDeadLetterObserverRunsBeforeTheWriteAndIsRetried(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "events"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Producer.Return.Successes = true
	producer, err := sarama.NewSyncProducer(brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"fine", "poison", "fine too"} {
		if _, _, err := producer.SendMessage(&sarama.ProducerMessage{Topic: "events", Key: sarama.StringEncoder("k"), Value: sarama.StringEncoder(v)}); err != nil {
			t.Fatal(err)
		}
	}
	producer.Close()
	client, err := sarama.NewClient(brokers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	h := &observingHandler{client: client, failures: 2}
	c := testConfig(brokers, "3.6.0", "events", "observer")
	c.BackoffMin, c.BackoffMax = 10*time.Millisecond, 50*time.Millisecond
	r := start(t, c, h)
	letters := readDeadLetters(t, brokers, "3.6.0", "events.dlq", 1)
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	if string(letters[0].GetValue()) != "poison" {
		t.Fatalf("dead letter %q", letters[0].GetValue())
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.calls) != 3 {
		t.Fatalf("DeadLettered called %d times, want 3 (two failures, then the write)", len(h.calls))
	}
	for i := range h.calls {
		if h.values[i] != "poison" || !strings.Contains(h.calls[i], "not a number") {
			t.Errorf("call %d: value %q, failure %q", i, h.values[i], h.calls[i])
		}
		if h.dlqEnds[i] != 0 {
			t.Errorf("call %d: the dead-letter topic already held %d letters", i, h.dlqEnds[i])
		}
	}
}
