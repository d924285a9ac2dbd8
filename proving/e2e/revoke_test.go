package e2e

import (
	"encoding/json"
	"testing"
)

// A member is starved of credits when every partition holds all it may, or
// when the process holds its whole limit and each partition holds records
// or waits for a credit. The "claimed while held" status is a CI run's
// first member: its last two claims came once the limit was already held
// by the first two, and admitted nothing.
func TestAdmitsNothing(t *testing.T) {
	for _, c := range []struct {
		name, status string
		starved      bool
	}{
		{"every partition full", `{"concurrency":{"limit":64,"in_flight":40},"partitions":[
			{"partition":0,"lag":900,"in_flight":16},{"partition":1,"lag":10,"in_flight":10}]}`, true},
		{"a partition with room", `{"concurrency":{"limit":64,"in_flight":26},"partitions":[
			{"partition":0,"lag":900,"in_flight":16},{"partition":1,"lag":900,"in_flight":10}]}`, false},
		{"limit held, records in every partition", `{"concurrency":{"limit":8,"in_flight":20},"partitions":[
			{"partition":0,"lag":900,"in_flight":13},{"partition":1,"lag":900,"in_flight":7}]}`, true},
		{"claimed while held", `{"concurrency":{"limit":32,"in_flight":32},"partitions":[
			{"partition":1,"committed":286,"admitted":286,"lag":1019,"in_flight":1},
			{"partition":2,"committed":253,"admitted":284,"lag":1005,"in_flight":31},
			{"partition":3,"committed":255,"lag":1081,"in_flight":0,"credit_wait_seconds":19.5},
			{"partition":4,"committed":254,"lag":994,"in_flight":0,"credit_wait_seconds":19.5}]}`, true},
		{"limit held, a partition neither holding nor waiting", `{"concurrency":{"limit":32,"in_flight":32},"partitions":[
			{"partition":2,"lag":1005,"in_flight":32},{"partition":3,"lag":1081,"in_flight":0}]}`, false},
		{"limit not held, a partition waiting", `{"concurrency":{"limit":64,"in_flight":32},"partitions":[
			{"partition":2,"lag":1005,"in_flight":32},{"partition":3,"lag":1081,"in_flight":0,"credit_wait_seconds":1}]}`, false},
		{"limit held, a partition without lag", `{"concurrency":{"limit":32,"in_flight":32},"partitions":[
			{"partition":2,"lag":1005,"in_flight":32},{"partition":3,"lag":0,"in_flight":0}]}`, false},
		{"nothing claimed", `{"concurrency":{"limit":8,"in_flight":8},"partitions":[]}`, false},
	} {
		var st listenerStatus
		if err := json.Unmarshal([]byte(c.status), &st); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := st.admitsNothing(16); got != c.starved {
			t.Errorf("%s: admitsNothing %v, want %v (%s)", c.name, got, c.starved, st.partitionsLine())
		}
	}
}
