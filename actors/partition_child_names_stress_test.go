package actors

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/patchflow/patchflow/messages"
)

// Children's names come back once each, however their children end:
// handler panics (the first attempt of every third record) mixed with
// successes and transient failures, in bursts, so names are freed and
// reused while failures, terminations and answers interleave. Afterwards
// the free list holds every name minted, none twice, nothing runs, every
// record succeeded once, every credit came back and no child is left in
// the registry. (Written by the review of the names' reuse.)
func TestChildNamesComeBackOnceUnderPanics(t *testing.T) {
	const records = 608
	var mu sync.Mutex
	attempts := map[int64]int{}
	succeeded := map[int64]int{}
	var panics atomic.Int64
	h := HandlerFunc(func(_ context.Context, r *messages.Record) error {
		off := r.GetOffset()
		mu.Lock()
		attempts[off]++
		n := attempts[off]
		mu.Unlock()
		if off%3 == 0 && n == 1 {
			panics.Add(1)
			panic(fmt.Sprintf("boom %d", off))
		}
		if off%5 == 0 && n == 1 {
			return messages.Transient(fmt.Errorf("flaky"))
		}
		mu.Lock()
		succeeded[off]++
		mu.Unlock()
		return nil
	})
	f := newAccountingFixture(t, h, DeadLetterFunc(func(context.Context, *messages.DeadLetter) error { return nil }))
	for off := int64(0); off < records; off += 16 {
		for i := range int64(16) {
			f.admit(off+i, fmt.Sprintf("k%d", (off+i)%7))
		}
		time.Sleep(time.Millisecond)
	}
	waitUntil(t, "all marked", func() bool { return f.lastMark() == records })
	type snap struct {
		free    []string
		names   int
		running int
		recs    int
	}
	var s snap
	// The last children's terminations follow their answers.
	waitUntil(t, "every name back", func() bool {
		ch := make(chan snap, 1)
		f.system.Root.Send(f.pid, poke(func(a *PartitionActor) {
			ch <- snap{append([]string(nil), a.freeNames...), a.names, a.running, len(a.records)}
		}))
		s = <-ch
		return len(s.free) >= s.names
	})
	sorted := slices.Clone(s.free)
	slices.Sort(sorted)
	if len(slices.Compact(sorted)) != len(s.free) {
		t.Errorf("free list has duplicates: %v", s.free)
	}
	if len(s.free) != s.names {
		t.Errorf("free names %d, minted %d: a name was lost or pushed twice", len(s.free), s.names)
	}
	if s.running != 0 || s.recs != 0 {
		t.Errorf("running %d records %d after all marked", s.running, s.recs)
	}
	mu.Lock()
	for o := int64(0); o < records; o++ {
		if succeeded[o] != 1 {
			t.Errorf("offset %d succeeded %d times", o, succeeded[o])
		}
	}
	mu.Unlock()
	if got := f.released.Load(); got != records {
		t.Errorf("released %d, want %d", got, records)
	}
	if got := f.actor.stats.Snapshot().Panics; got != panics.Load() {
		t.Errorf("stats.panics %d, handler panics %d", got, panics.Load())
	}
	prefix := f.pid.GetId() + "/"
	left := 0
	for _, m := range f.system.ProcessRegistry.LocalPIDs.LocalPIDs {
		for _, k := range m.Keys() {
			if strings.HasPrefix(k, prefix) {
				left++
			}
		}
	}
	if left != 0 {
		t.Errorf("%d children still registered", left)
	}
	t.Logf("minted %d names for %d records, %d panics", s.names, records, panics.Load())
}
