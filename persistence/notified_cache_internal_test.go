package persistence

import (
	"runtime"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// The cache, against a model of what was committed: it never calls a pair
// known that was not committed (its org would never hear of it), never
// holds more than its limit, and, while nothing was forgotten, knows every
// pair committed since the last purge.
func TestNotifiedCacheKnowsOnlyCommittedPairs(t *testing.T) {
	type notifiedPair struct {
		account  int
		advisory int32
	}
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.IntRange(1, 40).Draw(t, "limit")
		c := newNotifiedCache(limit)
		committed := map[notifiedPair]bool{} // in advisory_notified
		cached := map[notifiedPair]bool{}    // committed since the last purge
		forgot := false
		ids := rapid.SliceOfN(rapid.Int32Range(1, 30), 0, 12)
		account := rapid.IntRange(1, 5)
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			switch rapid.IntRange(0, 9).Draw(t, "op") {
			case 0:
				c.purge()
				clear(cached)
				forgot = false
			case 1, 2, 3, 4:
				a, batch := account.Draw(t, "account"), ids.Draw(t, "committed")
				for _, id := range batch {
					committed[notifiedPair{a, id}] = true
					cached[notifiedPair{a, id}] = true
				}
				c.committed(a, batch)
				if c.pairs > limit {
					t.Fatalf("%d pairs held, limit %d", c.pairs, limit)
				}
				if len(cached) > c.pairs {
					forgot = true
				}
			default:
				a, asked := account.Draw(t, "account"), ids.Draw(t, "asked")
				unknown := c.unknown(a, asked)
				for _, id := range asked {
					p := notifiedPair{a, id}
					if !committed[p] && !slices.Contains(unknown, id) {
						t.Fatalf("pair %v called known, never committed", p)
					}
					if !forgot && cached[p] && slices.Contains(unknown, id) {
						t.Fatalf("pair %v committed, nothing forgotten, called unknown", p)
					}
				}
			}
			n := 0
			for _, known := range c.byAccount {
				if !slices.IsSorted(known) || len(slices.Compact(slices.Clone(known))) != len(known) {
					t.Fatalf("ids not sorted and unique: %v", known)
				}
				n += len(known)
			}
			if n != c.pairs {
				t.Fatalf("counted %d pairs, holds %d", c.pairs, n)
			}
		}
	})
}

// What the cache costs per pair, held to the claim in its doc: the 62,776
// pairs of a 30-minute nemesis in at most 1 MB of live heap (an LRU of
// pairs took 8.4 MB).
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
	runtime.GC()
	runtime.ReadMemStats(&after)
	if c.pairs != accounts*perAccount {
		t.Fatalf("%d pairs held", c.pairs)
	}
	if live := int64(after.HeapAlloc) - int64(before.HeapAlloc); live > 1<<20 {
		t.Fatalf("%d pairs take %d bytes of live heap; want at most 1 MiB", c.pairs, live)
	}
	runtime.KeepAlive(c)
}
