package actors_test

import (
	"testing"

	"github.com/patchflow/patchflow/actors"
	"github.com/patchflow/patchflow/actors/ordering"
	"github.com/patchflow/patchflow/messages"
)

// A record that blocks its partition (partition order, its neighbour behind
// it, nothing else running) and fails on its own, each attempt making one
// call to VMaaS that is served and then one that fails (a second page, say),
// is dead-lettered after MaxAttempts: VMaaS's probe passes between its
// failures and no other record fails. Its own served call once made "a call
// served since" true, so the probe was never consulted; its own failed
// calls dragged the moving average below healthyShare after three attempts,
// and from then on every failure read as shared: never dead-lettered.
func TestARecordAloneWithAServedCallOfItsOwnIsDeadLettered(t *testing.T) {
	dlq := newScriptedDeadLetters(0, false)
	s := testSettings(ordering.ByPartition)
	s.MaxAttempts = actors.DefaultSettings().MaxAttempts // 5
	f := newPartitionFixture(t, s, dlq)
	f.deps.Observe(messages.DependencyVMaaS, true)
	f.admit(0, "hostage")
	f.admit(1, "neighbour")
	const tries = 12
	for attempt := 1; attempt <= tries; attempt++ {
		c := expectCall(t, f.handler)
		if c.offset != 0 { // the neighbour runs: the record was dead-lettered
			waitFor(t, "the record's dead letter", func() bool { return dlq.isWritten(0) })
			if st := f.stats.Snapshot(); st.RetriedOwn != int64(s.MaxAttempts-1) {
				t.Fatalf("dead-lettered after %d own retries, want %d", st.RetriedOwn, s.MaxAttempts-1)
			}
			return
		}
		f.deps.Probe(messages.DependencyVMaaS, true)
		f.handler.answer(0, func() error {
			f.deps.Observe(messages.DependencyVMaaS, true)  // its first call, served
			f.deps.Observe(messages.DependencyVMaaS, false) // its second, failed
			return vmaasHangs()
		})
		if dlq.isWritten(0) {
			return
		}
	}
	st := f.stats.Snapshot()
	t.Fatalf("a record failing alone with a passing probe was not dead-lettered after %d attempts (MaxAttempts %d): own retries %d, shared retries %d",
		tries, s.MaxAttempts, st.RetriedOwn, st.RetriedShared)
}
