package clients

import (
	"crypto/sha256"
	"fmt"
	"runtime"
	"testing"

	"pgregory.net/rapid"
)

// answerOf returns an answer of n packages, each with one update, whose
// strings are padded to pad bytes.
func answerOf(n, pad int) *UpdatesResponse {
	r := &UpdatesResponse{UpdateList: map[string]PackageUpdates{}, Releasever: "8", Basearch: "x86_64"}
	for i := range n {
		s := fmt.Sprintf("%0*d", pad, i)
		r.UpdateList["pkg-"+s] = PackageUpdates{AvailableUpdates: []Update{{Package: s, EVRA: s, Erratum: s}}}
	}
	return r
}

// Whatever the answers and their order, the cache keeps at most its
// entries and its bytes, its count of bytes is the sum of what it keeps,
// an answer alone over the bound is never kept, and one under it is kept
// as it is added.
func TestTheAnswerCacheKeepsItsBounds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		entries := rapid.IntRange(1, 8).Draw(t, "entries")
		maxBytes := rapid.Int64Range(0, 20_000).Draw(t, "maxBytes")
		c, err := newAnswerCache(entries, maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		answers := map[cacheKey]*UpdatesResponse{}
		for i, op := range rapid.SliceOfN(rapid.IntRange(0, 40), 1, 60).Draw(t, "ops") {
			key := sha256.Sum256([]byte{byte(op % 10)})
			if op >= 30 { // a lookup
				if got, ok := c.get(key); ok && got != answers[key] {
					t.Fatalf("op %d: the cache returned another answer for its key", i)
				}
				continue
			}
			a := answerOf(op, 1+op%7)
			if _, kept := answers[key]; !kept {
				answers[key] = a
			}
			_, had := c.get(key)
			c.add(key, a)
			size := int64(a.answerBytes())
			_, has := c.get(key)
			switch {
			case maxBytes > 0 && size > maxBytes && has && !had:
				t.Fatalf("op %d: kept an answer of %d bytes over the bound of %d", i, size, maxBytes)
			case (maxBytes == 0 || size <= maxBytes) && !has:
				t.Fatalf("op %d: an answer of %d bytes under the bound of %d was not kept", i, size, maxBytes)
			}
			if !had && has {
				answers[key] = a
			}
			n, bytes := c.size()
			var sum int64
			for _, k := range c.answers.Keys() {
				v, _ := c.answers.Peek(k)
				sum += v.size
			}
			if bytes != sum {
				t.Fatalf("op %d: counts %d bytes, keeps %d", i, bytes, sum)
			}
			if n > entries || (maxBytes > 0 && bytes > maxBytes) {
				t.Fatalf("op %d: keeps %d answers of %d bytes, bounds %d and %d", i, n, bytes, entries, maxBytes)
			}
		}
	})
}

// heapOf measures the heap the answers kept by keep hold, each, and
// returns it with keep's estimate.
func heapOf(keep func() *UpdatesResponse) (heap, estimate float64) {
	const n = 50
	kept := make([]*UpdatesResponse, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range kept {
		kept[i] = keep()
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap = float64(after.HeapAlloc-before.HeapAlloc) / n
	estimate = float64(kept[0].answerBytes())
	runtime.KeepAlive(kept)
	return heap, estimate
}

// The estimate follows the heap an answer holds: within a factor of 1.25
// either way, for the realistic answer of 400 packages as decoded and for
// other shapes as the cache keeps them (clones).
func TestAnswerBytesFollowsTheHeap(t *testing.T) {
	body := realisticAnswer(t)
	decoded := func() *UpdatesResponse {
		var r UpdatesResponse
		if err := unmarshalUpdates(body, &r); err != nil {
			t.Fatal(err)
		}
		return &r
	}
	check := func(name string, heap, estimate float64) {
		t.Helper()
		t.Logf("%s: %.0f bytes of heap, estimated %.0f (%.2f)", name, heap, estimate, estimate/heap)
		if r := estimate / heap; r < 0.8 || r > 1.25 {
			t.Errorf("%s: estimate %.0f bytes, heap %.0f (ratio %.2f)", name, estimate, heap, r)
		}
	}
	heap, estimate := heapOf(decoded)
	check("the realistic answer of 400 packages, decoded", heap, estimate)

	shapes := map[string]func() *UpdatesResponse{
		"the realistic answer, cloned": decoded,
		"2000 packages without updates": func() *UpdatesResponse {
			r := &UpdatesResponse{UpdateList: map[string]PackageUpdates{}}
			for i := range 2000 {
				r.UpdateList[fmt.Sprintf("package-%05d-1.2.3-4.el9.x86_64", i)] = PackageUpdates{AvailableUpdates: []Update{}}
			}
			return r
		},
		"1500 packages without updates (a table just past a power of two)": func() *UpdatesResponse {
			r := &UpdatesResponse{UpdateList: map[string]PackageUpdates{}}
			for i := range 1500 {
				r.UpdateList[fmt.Sprintf("p%07d", i)] = PackageUpdates{AvailableUpdates: []Update{}}
			}
			return r
		},
		"100 updates of 33-byte strings": func() *UpdatesResponse {
			r := &UpdatesResponse{UpdateList: map[string]PackageUpdates{}}
			for i := range 100 {
				s := func() string { return fmt.Sprintf("%033d", i) }
				r.UpdateList[s()] = PackageUpdates{AvailableUpdates: []Update{{Package: s(), PackageName: s(),
					EVRA: s(), Erratum: s(), Repository: s(), Basearch: s(), Releasever: s()}}}
			}
			return r
		},
	}
	for name, mk := range shapes {
		heap, estimate := heapOf(func() *UpdatesResponse { return mk().Clone() })
		check(name, heap, estimate)
	}
}
