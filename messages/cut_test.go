package messages_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"

	"github.com/patchflow/patchflow/messages"
)

// textGen draws texts of any bytes, UTF-8 or not, up to n bytes long.
func textGen(n int) *rapid.Generator[string] {
	return rapid.OneOf(
		rapid.StringN(0, n/4, n),
		rapid.Custom(func(t *rapid.T) string { return string(rapid.SliceOfN(rapid.Byte(), 0, n).Draw(t, "bytes")) }),
	)
}

// markerOf is the marker CutText gives s.
func markerOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return fmt.Sprintf("[truncated, %d bytes, sha256 %s]", len(s), hex.EncodeToString(sum[:]))
}

// CutText keeps a text of at most max bytes as it is; a longer one becomes
// a start of it (valid UTF-8, whole runes) and the marker of the whole text,
// at most max bytes in all when max has room for the marker, the marker
// alone when it has not; cut again, it keeps the first marker.
func TestCutText(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := textGen(600).Draw(t, "s")
		n := rapid.IntRange(0, 700).Draw(t, "max")
		got := messages.CutText(s, n)
		if len(s) <= n {
			if got != s {
				t.Fatalf("CutText(%q, %d) = %q, want it unchanged", s, n, got)
			}
			return
		}
		marker := markerOf(s)
		if !strings.HasSuffix(got, marker) {
			t.Fatalf("CutText(%q, %d) = %q does not end in %s", s, n, got, marker)
		}
		if !utf8.ValidString(got) {
			t.Fatalf("CutText(%q, %d) = %q is not UTF-8", s, n, got)
		}
		if limit := max(n, messages.MaxCutMarkerBytes); len(got) > limit {
			t.Fatalf("CutText(%q, %d) is %d bytes long, over %d", s, n, len(got), limit)
		}
		if got != marker {
			prefix := strings.TrimSuffix(got, "… "+marker)
			if prefix == got || !strings.HasPrefix(strings.ToValidUTF8(s, "\ufffd"), prefix) {
				t.Fatalf("CutText(%q, %d) = %q: %q is not a start of the text before its marker", s, n, got, prefix)
			}
		}
		// Cut again, shorter: the marker still names the original.
		again := messages.CutText(got, rapid.IntRange(0, len(got)).Draw(t, "again"))
		if !strings.HasSuffix(again, marker) {
			t.Fatalf("cut again, %q lost the first marker %s", again, marker)
		}
	})
}

func TestCutMarker(t *testing.T) {
	if got, want := messages.CutMarker([]byte("abc")),
		"truncated, 3 bytes, sha256 ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"; got != want {
		t.Fatalf("CutMarker(abc) = %q, want %q", got, want)
	}
	c := messages.CutOf([]byte("abc"))
	if got, want := c.Marker(), messages.CutMarker([]byte("abc")); got != want {
		t.Fatalf("CutOf(abc).Marker() = %q, want %q", got, want)
	}
	one := messages.CutOfHeaders([]*messages.Header{{Key: []byte("a"), Value: []byte("bc")}})
	if got := one.Marker(); !strings.HasPrefix(got, "1 header, truncated, 3 bytes, sha256 ") {
		t.Fatalf("marker of one header: %q", got)
	}
	two := messages.CutOfHeaders([]*messages.Header{{}, {}})
	if got := two.Marker(); !strings.HasPrefix(got, "2 headers, truncated, 0 bytes, sha256 ") {
		t.Fatalf("marker of two headers: %q", got)
	}
}

// The hash of cut headers is the SHA-256 of each key and value, each after
// its length as a uvarint, in order: headers that differ only in where one
// ends and the next begins hash differently.
func TestCutOfHeaders(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 20).Draw(t, "n")
		var headers []*messages.Header
		var want bytes.Buffer
		var size int64
		for i := range n {
			k := rapid.SliceOfN(rapid.Byte(), 0, 300).Draw(t, fmt.Sprintf("key%d", i))
			v := rapid.SliceOfN(rapid.Byte(), 0, 300).Draw(t, fmt.Sprintf("value%d", i))
			headers = append(headers, &messages.Header{Key: k, Value: v})
			for _, b := range [][]byte{k, v} {
				want.Write(binary.AppendUvarint(nil, uint64(len(b))))
				want.Write(b)
				size += int64(len(b))
			}
		}
		c := messages.CutOfHeaders(headers)
		sum := sha256.Sum256(want.Bytes())
		if c.GetCount() != int32(n) || c.GetSize() != size || !bytes.Equal(c.GetSha256(), sum[:]) {
			t.Fatalf("CutOfHeaders: count %d size %d sha256 %x; want %d, %d, %x", c.GetCount(), c.GetSize(), c.GetSha256(), n, size, sum)
		}
	})
	a := messages.CutOfHeaders([]*messages.Header{{Key: []byte("ab"), Value: []byte("c")}})
	b := messages.CutOfHeaders([]*messages.Header{{Key: []byte("a"), Value: []byte("bc")}})
	if bytes.Equal(a.GetSha256(), b.GetSha256()) {
		t.Fatal("headers ab=c and a=bc hash alike")
	}
}
