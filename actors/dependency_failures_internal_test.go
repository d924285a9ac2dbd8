package actors

import (
	"sync"
	"testing"
)

// The failure tally under concurrent partition actors and a taker loses
// and doubles no attempt, and counts a record once per period.
func TestFailureTallyConcurrent(t *testing.T) {
	var d Dependencies
	const writers, each = 4, 5000
	var wg sync.WaitGroup
	var taken, shared int64
	records := map[string]int{}
	stop := make(chan struct{})
	takerDone := make(chan struct{})
	take := func() {
		for _, f := range d.TakeFailures() {
			taken += f.Attempts
			shared += f.Shared
			seen := map[string]bool{}
			for _, r := range f.Records {
				if seen[r] {
					t.Errorf("record %s twice in one take", r)
				}
				seen[r] = true
				records[r]++
			}
		}
	}
	go func() {
		defer close(takerDone)
		for {
			select {
			case <-stop:
				return
			default:
				take()
			}
		}
	}()
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				d.failedAttempt("vmaas", recordID{"t", int32(w), int64(i % 10)}, i%2 == 0, "boom")
			}
		})
	}
	wg.Wait()
	close(stop)
	<-takerDone
	take()
	if taken != writers*each || shared != writers*each/2 {
		t.Fatalf("taken %d attempts (%d shared), want %d (%d)", taken, shared, writers*each, writers*each/2)
	}
	if len(records) != writers*10 {
		t.Fatalf("%d distinct records, want %d", len(records), writers*10)
	}
}

// Nobody taking (a bridge without the listener's watch) bounds the records
// named per dependency; their attempts are all counted.
func TestFailureTallyBoundsTheRecordsNamed(t *testing.T) {
	var d Dependencies
	for i := range maxTalliedRecords + 10 {
		d.failedAttempt("vmaas", recordID{"t", 0, int64(i)}, true, "503")
	}
	got := d.TakeFailures()
	if len(got) != 1 || got[0].Attempts != maxTalliedRecords+10 || len(got[0].Records) != maxTalliedRecords {
		t.Fatalf("%d entries, attempts %d, records named %d; want 1, %d, %d", len(got), got[0].Attempts, len(got[0].Records),
			maxTalliedRecords+10, maxTalliedRecords)
	}
}
