package persistence

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// upload400 is an upload of a system with 400 packages and 20 modules in
// random order, some repeated.
func upload400() SystemUpload {
	rng := rand.New(rand.NewPCG(1, 2))
	u := SystemUpload{EventTime: time.Unix(0, 1234567)}
	for range 400 {
		i := rng.IntN(350)
		u.Packages = append(u.Packages, Package{Name: fmt.Sprintf("pkg-%03d", i), EVRA: fmt.Sprintf("0:1.%d-1.el9.x86_64", i%7)})
	}
	for range 20 {
		i := rng.IntN(15)
		u.Modules = append(u.Modules, Module{Name: fmt.Sprintf("mod-%02d", i), Stream: fmt.Sprint(i % 3)})
	}
	return u
}

// The canonical order is by name, then EVRA (modules by name, then stream),
// without repeats: what the checksum and the stored rows are computed from.
// It is the order of the name and the EVRA joined by a NUL byte, as it was
// computed before (names hold no NUL byte).
func TestCanonicalizeSortsByNameThenEVRA(t *testing.T) {
	u := upload400()
	want := slices.Clone(u.Packages)
	slices.SortFunc(want, func(a, b Package) int {
		return strings.Compare(a.Name+"\x00"+a.EVRA, b.Name+"\x00"+b.EVRA)
	})
	want = slices.Compact(want)
	wantModules := slices.Clone(u.Modules)
	slices.SortFunc(wantModules, func(a, b Module) int {
		return strings.Compare(a.Name+"\x00"+a.Stream, b.Name+"\x00"+b.Stream)
	})
	wantModules = slices.Compact(wantModules)
	original := slices.Clone(u.Packages)
	c := u
	c.canonicalize()
	if !slices.Equal(c.Packages, want) || !slices.Equal(c.Modules, wantModules) {
		t.Fatalf("canonical packages or modules out of order")
	}
	if !slices.Equal(u.Packages, original) {
		t.Fatalf("canonicalize reordered the caller's packages")
	}
}

// go test ./persistence -run '^$' -bench Canonicalize -benchmem: the
// packages' sort as it was (comparing the name and EVRA joined by a NUL
// byte, two strings built a comparison) beside canonicalize's, in one run.
func BenchmarkCanonicalize(b *testing.B) {
	u := upload400()
	b.Run("joined strings, before", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p := slices.Clone(u.Packages)
			slices.SortFunc(p, func(a, b Package) int {
				return strings.Compare(a.Name+"\x00"+a.EVRA, b.Name+"\x00"+b.EVRA)
			})
		}
	})
	b.Run("canonicalize", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c := u
			c.canonicalize()
		}
	})
}
