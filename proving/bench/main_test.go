package bench

import (
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if d, err := time.ParseDuration(os.Getenv(burnEnv)); err == nil {
		burn(d) // a child of TestTreeCPUCountsLiveAndReapedChildren
		os.Exit(0)
	}
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"),
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"))
}

// Every design runs end to end on the in-process broker and measures
// something; the figures themselves belong to `make bench`.
func TestEveryDesignMeasures(t *testing.T) {
	w := Window{Warmup: 100 * time.Millisecond, Measure: 300 * time.Millisecond}
	for _, design := range []string{DesignActors, DesignPool} {
		p, err := Pipeline(KFake{}, ScenarioLatency, design, time.Millisecond, 4, 16, w)
		if err != nil || p.Records == 0 || p.Broker != "kfake" || p.Ideal != 16000 {
			t.Errorf("%s: %+v %v", design, p, err)
		}
	}
	for _, design := range []string{DesignSequential, DesignSequentialConsumers, DesignSequentialSyncCommit} {
		p, err := Sequential(KFake{}, design, time.Millisecond, 4, 2, w)
		if err != nil || p.Records == 0 {
			t.Errorf("%s: %+v %v", design, p, err)
		}
	}
	p, err := Pipeline(KFake{}, ScenarioOverhead, DesignActors, 0, 4, 64, Window{Records: 20000})
	if err != nil || p.Records < 15000 || p.CPUMicros <= 0 {
		t.Errorf("overhead: %+v %v", p, err)
	}
}
