package persistence

import (
	"fmt"
	"testing"
)

// go test ./persistence -run '^$' -bench IDCacheLookup: a hit in the
// package cache of 50,000 entries, from two goroutines, as the lookups
// were (Get: exclusive lock, entry moved to the front) beside as they are
// (Peek: read lock), in one run.
func BenchmarkIDCacheLookup(b *testing.B) {
	c := newIDCache(DefaultIDCacheSize)
	var keys []Package
	for i := range 50_000 {
		p := Package{Name: fmt.Sprintf("package-name-%05d", i), EVRA: fmt.Sprintf("0:1.2.%d-3.el9.x86_64", i%13)}
		keys = append(keys, p)
		c.packages.Add(p, int64(i))
	}
	for _, peek := range []bool{false, true} {
		name := "Get, before"
		if peek {
			name = "Peek"
		}
		b.Run(name, func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for i := 0; pb.Next(); i++ {
					k := keys[(i*7919)%len(keys)]
					if peek {
						c.packages.Peek(k)
					} else {
						c.packages.Get(k)
					}
				}
			})
		})
	}
}
