package actors

import "testing"

// A topic's lag counts every partition, claimed or not; one never committed
// counts from its oldest record; a committed offset past the newest (the
// log truncated under it) counts nothing rather than less than nothing.
func TestTopicLagCountsEveryPartition(t *testing.T) {
	ends := map[int32]partitionEnds{
		0: {newest: 100, committed: 90},            // claimed: 10
		1: {newest: 50, committed: 50},             // claimed, caught up
		2: {newest: 30, committed: -1, oldest: 10}, // unclaimed, never committed: 20
		3: {newest: 7, committed: 3},               // unclaimed: 4
		4: {newest: 5, committed: 9},               // claimed, truncated: 0
		5: {newest: 0, committed: -1, oldest: 0},   // unclaimed, empty
	}
	got := topicLag("t", ends, map[int32]bool{0: true, 1: true, 4: true})
	want := TopicLag{Topic: "t", Partitions: 6, Unclaimed: 3, Lag: 34, UnclaimedLag: 24}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if got := topicLag("t", ends, nil); got.Unclaimed != 6 || got.UnclaimedLag != got.Lag {
		t.Fatalf("with no member: %+v, want every partition unclaimed", got)
	}
}
