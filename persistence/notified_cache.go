package persistence

import (
	"slices"
	"sync"
)

// notifiedCache remembers (account, advisory) pairs known to be in
// advisory_notified (committed; rows are never deleted, and the cache is
// emptied when the server is another one: idCache.seeServer), so an
// evaluation sends only the installable advisories its org may not have
// heard of: once an org's fleet is evaluated, the effects' statement
// leaves the notification's parts out (effectsStatement), inserts nothing
// and waits for no other transaction's insert of the same pair.
//
// It must never hold a pair that is not committed (the pair's org would
// never be notified of it); forgetting one costs only an anti-join. Each
// account's advisory ids are one sorted slice, 4 bytes a pair: an LRU of
// pairs took 134 bytes each (8.4 MB live for the 62,776 pairs of a
// 30-minute nemesis, which its RSS judge counted as growth).
type notifiedCache struct {
	mu        sync.Mutex
	byAccount map[int][]int32 // sorted, unique, no spare capacity
	pairs     int
	limit     int
}

// notifiedCacheSize bounds the pairs held: 800 KB of ids, plus a map
// entry and a slice header per account.
const notifiedCacheSize = 200_000

func newNotifiedCache(limit int) *notifiedCache {
	return &notifiedCache{byAccount: map[int][]int32{}, limit: limit}
}

// unknown returns the ids of installable not known notified for account.
func (n *notifiedCache) unknown(account int, installable []int32) []int32 {
	n.mu.Lock()
	defer n.mu.Unlock()
	known := n.byAccount[account]
	var out []int32
	for _, id := range installable {
		if _, ok := slices.BinarySearch(known, id); !ok {
			out = append(out, id)
		}
	}
	return out
}

// committed records that installable are notified for account: called
// after the commit of a transaction that wrote them (or waited for the
// transaction that did), through idCache.notifiedCommitted, which drops
// them when the cache was emptied since the write began. Over the limit,
// whole other accounts are forgotten (the map's order: any), this one
// last.
func (n *notifiedCache) committed(account int, installable []int32) {
	if len(installable) == 0 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	known := n.byAccount[account]
	var fresh []int32
	for _, id := range installable {
		if _, ok := slices.BinarySearch(known, id); !ok {
			fresh = append(fresh, id)
		}
	}
	if len(fresh) == 0 { // the steady state: every evaluation passes its installable ids
		return
	}
	slices.Sort(fresh)
	fresh = slices.Compact(fresh)
	merged := make([]int32, len(known)+len(fresh))
	i, j := 0, 0
	for k := range merged {
		if j == len(fresh) || (i < len(known) && known[i] < fresh[j]) {
			merged[k], i = known[i], i+1
		} else {
			merged[k], j = fresh[j], j+1
		}
	}
	n.byAccount[account] = merged
	n.pairs += len(fresh)
	for acc, ids := range n.byAccount {
		if n.pairs <= n.limit {
			return
		}
		if acc != account {
			delete(n.byAccount, acc)
			n.pairs -= len(ids)
		}
	}
	if n.pairs > n.limit { // this account alone is over the limit
		delete(n.byAccount, account)
		n.pairs -= len(merged)
	}
}

// purge forgets every pair.
func (n *notifiedCache) purge() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.byAccount)
	n.pairs = 0
}
