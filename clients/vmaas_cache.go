package clients

import (
	"cmp"
	"crypto/sha256"
	"slices"
	"strings"
)

// cacheKey identifies an UpdatesRequest up to the order and repetition of its
// lists.
type cacheKey [sha256.Size]byte

// canonicalBody returns the JSON body to send for req and its cache key.
//
// The body is built from a canonical copy of req: package, repository and
// module lists sorted and de-duplicated (VMaaS treats them as sets), every
// other field as it is. Since encoding/json writes struct fields in a fixed
// order, two requests that differ only in list order or repetition encode to
// the same bytes, and the SHA-256 of those bytes is the key. (appendRequest
// writes json.Marshal's bytes without reflection.) Sending the
// canonical body rather than the caller's also keeps the body and the key
// from ever disagreeing. req is not modified.
func canonicalBody(req *UpdatesRequest) ([]byte, cacheKey) {
	c := *req
	c.PackageList = sortedUniqueStrings(req.PackageList)
	if c.PackageList == nil {
		// package_list is required by VMaaS: send [] rather than null so
		// the server's answer (a 400) names the real problem.
		c.PackageList = []string{}
	}
	c.RepositoryList = sortedUniqueStrings(req.RepositoryList)
	c.ModulesList = sortedUnique(req.ModulesList, func(a, b Module) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.Stream, b.Stream))
	})
	body := appendRequest(make([]byte, 0, requestSize(&c)), &c)
	return body, sha256.Sum256(body)
}

// requestSize is about the size of req's JSON, to allocate it at once.
func requestSize(req *UpdatesRequest) int {
	n := 256
	for _, p := range req.PackageList {
		n += len(p) + 3
	}
	for _, r := range req.RepositoryList {
		n += len(r) + 3
	}
	for _, m := range req.ModulesList {
		n += len(m.Name) + len(m.Stream) + 40
	}
	return n
}

// sortedUnique returns a sorted copy of s without duplicates; nil for an
// empty s, so that nil and empty lists encode (and hash) the same.
func sortedUnique[T comparable](s []T, compare func(a, b T) int) []T {
	if len(s) == 0 {
		return nil
	}
	c := slices.Clone(s)
	slices.SortFunc(c, compare)
	return slices.Compact(c)
}

// sortedUniqueStrings is sortedUnique for strings, in the same order
// (strings.Compare's), without a comparison function's calls.
func sortedUniqueStrings(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	c := slices.Clone(s)
	slices.Sort(c)
	return slices.Compact(c)
}
