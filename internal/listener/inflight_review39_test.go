package listener_test

import (
	"context"
	"testing"

	"github.com/patchflow/patchflow/consumer"
)

// Review of 3c4ecda: LISTENER_INFLIGHT_TOTAL alone, below the per-partition
// default (64) and the floor's default (8), parses, but the consumer it
// describes is refused by consumer.New, so the listener cannot start. Before
// 3c4ecda it ran (the floor follows the total: "default 8, or
// InFlightTotal if less").
func TestReview39InFlightTotalAloneStartsTheListener(t *testing.T) {
	cfg, _, err := parse(nil, lookup(map[string]string{"KAFKA_BROKERS": "embedded", "LISTENER_INFLIGHT_TOTAL": "4"}))
	if err != nil {
		t.Fatalf("the listener's settings refuse it: %v", err)
	}
	cc := cfg.ConsumerConfig()
	cc.Brokers = []string{"127.0.0.1:9092"} // the embedded broker's address comes at run
	if _, err := consumer.New(cc, consumer.HandlerFunc(func(context.Context, *consumer.Record) error { return nil })); err != nil {
		t.Errorf("LISTENER_INFLIGHT_TOTAL=4: the consumer refuses the listener's configuration: %v", err)
	}
}
