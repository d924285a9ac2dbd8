package messages

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A cut marker stands for bytes left out of a text or an envelope:
// "truncated, N bytes, sha256 <64 hex digits>". N and the hash are those of
// the whole original, so a person can match what is left to its source.
const (
	cutPrefix = "truncated, "
	cutBytes  = " bytes, sha256 "
)

// CutMarker returns the marker of b: "truncated, N bytes, sha256 <hex>",
// with N the length of b and <hex> its SHA-256.
func CutMarker(b []byte) string {
	sum := sha256.Sum256(b)
	return cutMarker(int64(len(b)), sum[:])
}

func cutMarker(size int64, sum []byte) string {
	return cutPrefix + strconv.FormatInt(size, 10) + cutBytes + hex.EncodeToString(sum)
}

// MaxCutMarkerBytes bounds the length of a marker CutText appends, its
// brackets and the space before them included.
const MaxCutMarkerBytes = len("… []") + len(cutPrefix) + 19 + len(cutBytes) + 2*sha256.Size

// CutText returns s when it is at most max bytes long, else the longest
// start of s (valid UTF-8, cut between runes) followed by
// "… [truncated, N bytes, sha256 <hex>]" that is at most max bytes long;
// when max leaves no room for any of s, the marker alone in its brackets,
// which may be longer than max (never longer than MaxCutMarkerBytes).
//
// When s already ends in such a marker (it was cut before), the marker is
// kept as it is, so it still names the first original; only the text
// before it is shortened.
func CutText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	body, size, sum := s, int64(len(s)), []byte(nil)
	if b, n, h, ok := splitCut(s); ok {
		body, size, sum = b, n, h
	} else {
		whole := sha256.Sum256([]byte(s))
		sum = whole[:]
	}
	marker := "[" + cutMarker(size, sum) + "]"
	room := max - len(marker) - len("… ")
	if room <= 0 {
		return marker
	}
	return validPrefix(body, room) + "… " + marker
}

// splitCut reports whether s ends in a marker CutText appended, and
// returns the text before it and the marker's size and hash.
func splitCut(s string) (body string, size int64, sum []byte, ok bool) {
	const hexLen = 2 * sha256.Size
	if !strings.HasSuffix(s, "]") {
		return "", 0, nil, false
	}
	open := strings.LastIndex(s, "["+cutPrefix)
	if open < 0 {
		return "", 0, nil, false
	}
	m := s[open+1+len(cutPrefix) : len(s)-1] // "N bytes, sha256 <hex>"
	i := strings.Index(m, cutBytes)
	if i <= 0 || len(m) != i+len(cutBytes)+hexLen {
		return "", 0, nil, false
	}
	n, err := strconv.ParseInt(m[:i], 10, 64)
	h, herr := hex.DecodeString(m[i+len(cutBytes):])
	if err != nil || herr != nil || n < 0 {
		return "", 0, nil, false
	}
	body = strings.TrimSuffix(strings.TrimSuffix(s[:open], " "), "…")
	return body, n, h, true
}

// validPrefix returns the longest start of s, as valid UTF-8 (each run of
// bytes that is not as U+FFFD), of at most n bytes, cut between runes.
func validPrefix(s string, n int) string {
	var b strings.Builder
	for _, r := range s {
		size := utf8.RuneLen(r) // U+FFFD for a byte that is not UTF-8
		if b.Len()+size > n {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Marker returns c as a marker: "truncated, N bytes, sha256 <hex>", with
// "H headers, " before it for headers ("1 header, ").
func (c *Cut) Marker() string {
	m := cutMarker(c.GetSize(), c.GetSha256())
	switch n := c.GetCount(); {
	case n == 1:
		return "1 header, " + m
	case n > 1:
		return strconv.Itoa(int(n)) + " headers, " + m
	}
	return m
}

// CutOf returns the Cut of b: its length and SHA-256.
func CutOf(b []byte) *Cut {
	sum := sha256.Sum256(b)
	return &Cut{Size: int64(len(b)), Sha256: sum[:]}
}

// CutOfHeaders returns the Cut of headers: how many, the sum of their keys'
// and values' lengths, and the SHA-256 of each key and value in order, each
// preceded by its length as an unsigned varint.
func CutOfHeaders(headers []*Header) *Cut {
	h := sha256.New()
	var size int64
	var n [binary.MaxVarintLen64]byte
	for _, x := range headers {
		for _, b := range [][]byte{x.GetKey(), x.GetValue()} {
			h.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))])
			h.Write(b)
			size += int64(len(b))
		}
	}
	return &Cut{Size: size, Sha256: h.Sum(nil), Count: int32(len(headers))}
}
