package persistence

import (
	"runtime"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// The cache, against a model of what was committed on the server now: it
// never calls a pair known that was not committed there (its org would
// never hear of it), never holds more than its limit, and, while nothing
// was forgotten, knows every pair committed since the last purge. A purge
// is a change of server, which may lack every row committed before it, and
// a write that resolved its ids before a purge commits on the old server:
// it learns through idCache.notifiedCommitted under its view.
func TestNotifiedCacheKnowsOnlyCommittedPairs(t *testing.T) {
	type notifiedPair struct {
		account  int
		advisory int32
	}
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.IntRange(1, 40).Draw(t, "limit")
		ic := newIDCache(16)
		ic.notified = newNotifiedCache(limit)
		server := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
		ic.seeServer(server)
		c := ic.notified
		committed := map[notifiedPair]bool{} // in advisory_notified on the server now
		forgot := false
		ids := rapid.SliceOfN(rapid.Int32Range(1, 30), 0, 12)
		account := rapid.IntRange(1, 5)
		var stale []serverView // views before a purge
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			switch rapid.IntRange(0, 9).Draw(t, "op") {
			case 0:
				stale = append(stale, ic.view())
				server = server.Add(time.Second)
				ic.seeServer(server)
				clear(committed)
				forgot = false
			case 1:
				if len(stale) == 0 {
					continue
				}
				// A write that resolved its ids before the purge commits on the old server.
				v := rapid.SampledFrom(stale).Draw(t, "stale view")
				ic.notifiedCommitted(v, account.Draw(t, "account"), ids.Draw(t, "committed on the old server"))
			case 2, 3, 4:
				a, batch := account.Draw(t, "account"), ids.Draw(t, "committed")
				v := ic.view()
				for _, id := range batch {
					committed[notifiedPair{a, id}] = true
				}
				ic.notifiedCommitted(v, a, batch)
				if c.pairs > limit {
					t.Fatalf("%d pairs held, limit %d", c.pairs, limit)
				}
				if len(committed) > c.pairs {
					forgot = true
				}
			default:
				a, asked := account.Draw(t, "account"), ids.Draw(t, "asked")
				unknown := c.unknown(a, asked)
				for _, id := range asked {
					p := notifiedPair{a, id}
					if !committed[p] && !slices.Contains(unknown, id) {
						t.Fatalf("pair %v called known, not committed on this server", p)
					}
					if !forgot && committed[p] && slices.Contains(unknown, id) {
						t.Fatalf("pair %v committed, nothing forgotten, called unknown", p)
					}
				}
			}
			n := 0
			for _, known := range c.byAccount {
				if !slices.IsSorted(known) || len(slices.Compact(slices.Clone(known))) != len(known) || cap(known) != len(known) {
					t.Fatalf("ids not sorted, unique and without spare room: %v (capacity %d)", known, cap(known))
				}
				n += len(known)
			}
			if n != c.pairs {
				t.Fatalf("counted %d pairs, holds %d", c.pairs, n)
			}
		}
	})
}

// The steady state, every evaluation committing installable ids its org
// was notified of long ago, costs a lookup: nothing is allocated or copied.
func TestNotifiedCacheRecommitsKnownPairsForFree(t *testing.T) {
	c := newNotifiedCache(notifiedCacheSize)
	known := make([]int32, 5000)
	for i := range known {
		known[i] = int32(i * 3)
	}
	c.committed(1, known)
	host := known[1000:1300]
	if allocs := testing.AllocsPerRun(100, func() { c.committed(1, host) }); allocs != 0 {
		t.Fatalf("%v allocations to commit 300 known pairs", allocs)
	}
}

// What the cache costs per pair, held to the claim in its doc: the 62,776
// pairs of a 30-minute nemesis in at most 1 MiB of live heap (an LRU of
// pairs took 8.4 MB), also after its accounts grew.
func TestNotifiedCacheIsCompact(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c := newNotifiedCache(notifiedCacheSize)
	const accounts, perAccount = 300, 210 // 63,000 pairs
	for a := range accounts {
		for b := range 7 {
			batch := make([]int32, 0, perAccount/7)
			for i := range perAccount / 7 {
				batch = append(batch, int32(i*7+b))
			}
			c.committed(a, batch)
		}
	}
	// Committed again, with one new pair each: no spare room is kept.
	for a := range accounts {
		c.committed(a, []int32{-1, 0, 7})
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if c.pairs != accounts*(perAccount+1) {
		t.Fatalf("%d pairs held", c.pairs)
	}
	if live := int64(after.HeapAlloc) - int64(before.HeapAlloc); live > 1<<20 {
		t.Fatalf("%d pairs take %d bytes of live heap; want at most 1 MiB", c.pairs, live)
	}
	runtime.KeepAlive(c)
}
