package actors_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: a
// partition actor, evaluation actor or bridge that outlives its claim.
//
// Two library goroutines are ignored: protoactor's dead-letter log throttle
// runs a one-shot timer for the throttle interval after a message reaches a
// stopped actor (a late Done after a drain), then ends by itself; and the
// go-metrics meter arbiter that sarama starts is one goroutine per process,
// by that library's design.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"),
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"))
}
