package consumer_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: a
// consumer whose Run returned must have stopped its members, clients,
// actors and watchers. Ignored, as in package actors: protoactor's
// dead-letter log throttle (a one-shot timer that ends by itself) and the
// go-metrics meter arbiter sarama starts once per process.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"),
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"))
}
