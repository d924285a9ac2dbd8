package actors

import "time"

// Observer receives what metrics need from the pipeline beyond the Stats
// counters: handler and drain timings, claims. Implementations must be
// cheap and safe for concurrent use; HandlerDone runs once per attempt.
type Observer interface {
	// HandlerDone reports one handler attempt: outcome is ok, transient,
	// permanent, unknown, cancelled or panic.
	HandlerDone(outcome string, d time.Duration)
	// DrainDone reports the end of a claim's drain.
	DrainDone(d time.Duration, timedOut bool)
	// ClaimStarted reports a partition claimed (a rebalance gave it to us).
	ClaimStarted(topic string, partition int32)
}

type noObserver struct{}

func (noObserver) HandlerDone(string, time.Duration) {}
func (noObserver) DrainDone(time.Duration, bool)     {}
func (noObserver) ClaimStarted(string, int32)        {}
