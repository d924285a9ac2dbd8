package consumer

import (
	"context"
	"testing"
	"time"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/internal/pipeline"
)

// testConfig is a consumer's configuration for a test: short session and
// heartbeat, no progress lines.
func testConfig(brokers []string, version, topic, group string) Config {
	return Config{Brokers: brokers, Topic: topic, Group: group, KafkaVersion: version,
		SessionTimeout: 6 * time.Second, HeartbeatInterval: time.Second, ProgressInterval: -1}
}

// running is a consumer started by start.
type running struct {
	Bridge *actors.Bridge
	cancel context.CancelFunc
	done   chan error
}

// start runs a consumer in the background and returns once its bridge
// exists; it fails the test when Run returns first.
func start(t *testing.T, cfg Config, h Handler, opts ...Option) *running {
	t.Helper()
	bridges := make(chan *actors.Bridge, 1)
	c, err := New(cfg, h, append(opts, Option{pipeline.Started(func(b *actors.Bridge) { bridges <- b })})...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- c.Run(ctx) }()
	select {
	case r.Bridge = <-bridges:
	case err := <-r.done:
		cancel()
		t.Fatalf("the consumer did not start: %v", err)
	}
	return r
}

// Stop drains the consumer and returns Run's result; once only.
func (r *running) Stop() error {
	r.cancel()
	return <-r.done
}
