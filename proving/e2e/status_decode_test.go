package e2e

import (
	"encoding/json"
	"maps"
	"testing"
	"time"
)

// The suite reads /status.json and the JSON log of this listener and of
// builds before their names and values changed (E2E_BIN): totals in
// snake_case or Go's names, an offset absent or -1 as none, a duration as a
// string or as integer nanoseconds.
func TestReadsStatusAndLogsOfEitherBuild(t *testing.T) {
	for name, raw := range map[string]string{
		"snake_case": `{"partitions":[{"partition":0,"in_flight":1},{"partition":1,"committed":5,"admitted":7}],
			"totals":{"admitted":9,"dead_lettered":2,"retried_shared":3,"skipped_by_reason":{"r":1}}}`,
		"earlier": `{"partitions":[{"partition":0,"committed":-1,"admitted":-1,"in_flight":1},{"partition":1,"committed":5,"admitted":7}],
			"Totals":{"Admitted":9,"DeadLettered":2,"RetriedShared":3,"SkippedByReason":{"r":1}}}`,
	} {
		var st listenerStatus
		if err := json.Unmarshal([]byte(raw), &st); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := []partitionStatus{{Partition: 0, Committed: -1, Admitted: -1, InFlight: 1}, {Partition: 1, Committed: 5, Admitted: 7}}
		if len(st.Partitions) != 2 || st.Partitions[0] != want[0] || st.Partitions[1] != want[1] {
			t.Errorf("%s: partitions %+v, want %+v", name, st.Partitions, want)
		}
		if tt := st.Totals; tt.Admitted != 9 || tt.DeadLettered != 2 || tt.RetriedShared != 3 || !maps.Equal(tt.SkippedByReason, map[string]int64{"r": 1}) {
			t.Errorf("%s: totals %+v", name, tt)
		}
	}
	for raw, want := range map[string]time.Duration{`{"msg":"claim ended","drain":"1.5s"}`: 1500 * time.Millisecond,
		`{"msg":"claim ended","drain":1500000000}`: 1500 * time.Millisecond, `{"msg":"x","drain":"soon"}`: 0} {
		var e logEntry
		if err := json.Unmarshal([]byte(raw), &e); err != nil || time.Duration(e.Drain) != want || e.Msg == "" {
			t.Errorf("%s: drain %v (%v), want %v", raw, time.Duration(e.Drain), err, want)
		}
	}
}
