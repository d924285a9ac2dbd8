package e2e

import "testing"

// A fault at a fraction of the records fires once that fraction is
// committed, and never on a topic that holds no record yet.
func TestAFaultIsDueAtItsFractionOfTheRecords(t *testing.T) {
	for _, c := range []struct {
		at          float64
		done, total int64
		want        bool
	}{
		{0.2, 0, 0, false}, // the first look, before the producer's first record
		{0.2, 0, 8000, false},
		{0.2, 1599, 8000, false},
		{0.2, 1600, 8000, true},
		{0.05, 8000, 8000, true},
	} {
		if got := due(c.at, c.done, c.total); got != c.want {
			t.Errorf("due(%v, %d, %d) = %v, want %v", c.at, c.done, c.total, got, c.want)
		}
	}
}
