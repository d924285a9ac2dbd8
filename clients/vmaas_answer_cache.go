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
// bytes, each rounded up to the allocator's 8), its updates and its map's
// entries. Decoded answers hold a little more (TestAnswerBytesFollowsTheHeap:
// 0.9 of the heap for the realistic answer of 400 packages).
func (r *UpdatesResponse) answerBytes() int {
	const (
		stringHeader = 16
		update       = 7 * stringHeader
		// A map entry: the key's header, the value's slice header, and
		// the table's overhead per slot.
		mapEntry = stringHeader + 24 + 16
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

// str is the heap a string's bytes take: its length rounded up to 8.
func str(s string) int { return (len(s) + 7) &^ 7 }
