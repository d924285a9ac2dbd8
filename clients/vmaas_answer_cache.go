package clients

import (
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"
)

// answerCache keeps VMaaS answers by canonical request, bounded both in
// entries and in bytes: an answer's size follows its host's packages
// (about 115 KB for 400, several times that for hosts of thousands), so a
// bound in entries alone leaves the memory to the fleet. The least
// recently used answers leave first. Safe for concurrent use.
type answerCache struct {
	answers  *lru.Cache[cacheKey, cachedAnswer]
	maxBytes int64        // 0: no bound in bytes
	bytes    atomic.Int64 // the kept answers' answerBytes
}

type cachedAnswer struct {
	resp *UpdatesResponse
	size int64
}

func newAnswerCache(entries int, maxBytes int64) (*answerCache, error) {
	c := &answerCache{maxBytes: maxBytes}
	var err error
	// Every answer leaves through the callback (evicted, removed as the
	// oldest, purged), so what it subtracts is what add added, once.
	c.answers, err = lru.NewWithEvict(entries, func(_ cacheKey, a cachedAnswer) { c.bytes.Add(-a.size) })
	return c, err
}

func (c *answerCache) get(key cacheKey) (*UpdatesResponse, bool) {
	a, ok := c.answers.Get(key)
	return a.resp, ok
}

// add keeps resp, which must not be changed afterwards, unless an answer
// for key is kept already or resp alone is over the bound in bytes. It
// then evicts the least recently used answers until the bound holds again.
// Concurrent adds may overshoot the bound by the answers being added, each
// of them under it.
func (c *answerCache) add(key cacheKey, resp *UpdatesResponse) {
	size := int64(resp.answerBytes())
	if c.maxBytes > 0 && size > c.maxBytes {
		return
	}
	if found, _ := c.answers.ContainsOrAdd(key, cachedAnswer{resp, size}); found {
		return
	}
	c.bytes.Add(size)
	for c.maxBytes > 0 && c.bytes.Load() > c.maxBytes {
		if _, _, ok := c.answers.RemoveOldest(); !ok {
			return
		}
	}
}

// size returns the answers kept and their answerBytes.
func (c *answerCache) size() (entries int, bytes int64) { return c.answers.Len(), c.bytes.Load() }

// answerBytes estimates the heap an answer holds: its strings (headers and
// bytes, each rounded up as the allocator's size classes round it), its
// updates and its map's entries. TestAnswerBytesFollowsTheHeap holds it
// within 0.8-1.25 of the heap for the realistic answer of 400 packages and
// for other shapes (thousands of packages without updates, long strings).
func (r *UpdatesResponse) answerBytes() int {
	const (
		stringHeader = 16
		update       = 7 * stringHeader
		// A map entry: the key's header and the value's slice header in
		// a slot, its control byte, and the slots a table keeps free (up
		// to half of them, sized to a power of two).
		mapEntry = 2 * (stringHeader + 24 + 1)
	)
	n := 256 + str(r.Releasever) + str(r.Basearch) + str(r.LastChange)
	for k, v := range r.UpdateList {
		n += mapEntry + str(k)
		for _, u := range v.AvailableUpdates {
			n += update + str(u.Package) + str(u.PackageName) + str(u.EVRA) + str(u.Erratum) +
				str(u.Repository) + str(u.Basearch) + str(u.Releasever)
		}
	}
	for _, s := range r.RepositoryList {
		n += stringHeader + str(s)
	}
	return n
}

// str is about the heap a string's bytes take: its length rounded up to
// the allocator's size class (steps of 8 up to 24 bytes, 16 up to 256, and
// coarser beyond, taken as 64).
func str(s string) int {
	n := len(s)
	switch {
	case n <= 24:
		return (n + 7) &^ 7
	case n <= 256:
		return (n + 15) &^ 15
	}
	return (n + 63) &^ 63
}
