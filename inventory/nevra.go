package inventory

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// NEVRA identifies one RPM package build: name, epoch, version, release and
// architecture. A NEVRA from ParseNEVRA has every string field non-empty,
// Epoch between 0 and math.MaxInt32, and String() parses back to it.
type NEVRA struct {
	Name    string
	Epoch   int
	Version string
	Release string
	Arch    string
}

// String returns the canonical form name-E:V-R.A, with the epoch written even
// when it is 0 so that equal packages always give equal strings.
func (n NEVRA) String() string {
	return n.Name + "-" + strconv.Itoa(n.Epoch) + ":" + n.Version + "-" + n.Release + "." + n.Arch
}

// EVRA returns String without the name and its dash: E:V-R.A.
func (n NEVRA) EVRA() string {
	return strconv.Itoa(n.Epoch) + ":" + n.Version + "-" + n.Release + "." + n.Arch
}

// ParseNEVRA parses the forms inventory reports packages in:
//
//	name-epoch:version-release.arch   kernel-0:4.18.0-305.el8.x86_64
//	name-version-release.arch         kernel-4.18.0-305.el8.x86_64 (epoch 0)
//	epoch:name-version-release.arch   0:kernel-4.18.0-305.el8.x86_64
//
// The string is split from the right (arch after the last dot, then release
// and version after the last dashes), which is why names may contain dashes
// and dots while version, release and arch may not contain dashes. The error
// says which part is missing or wrong.
func ParseNEVRA(s string) (NEVRA, error) {
	var n NEVRA
	if s == "" {
		return n, nevraError(s, "empty string")
	}
	if hasSpace(s) {
		return n, nevraError(s, "contains white space")
	}

	// One pass from the right finds the separators: the last '.', the last
	// two '-' before it, and the ':' of each part in between. ('.', '-'
	// and ':' are ASCII, so they cannot be part of a longer UTF-8
	// sequence.)
	i := len(s) - 1
	archSeparator := false // a '-' or ':' in the arch
	for ; i >= 0 && s[i] != '.'; i-- {
		if s[i] == '-' || s[i] == ':' {
			archSeparator = true
		}
	}
	if i < 0 {
		return n, nevraError(s, "missing arch (no '.')")
	}
	dot := i
	arch := s[dot+1:]
	if arch == "" {
		return n, nevraError(s, "empty arch")
	}
	if archSeparator {
		// Without an arch the last dot falls inside version or release.
		return n, nevraError(s, fmt.Sprintf("missing arch (%s after the last '.' is not an arch)", quote(arch)))
	}

	releaseColon := false
	for i = dot - 1; i >= 0 && s[i] != '-'; i-- {
		if s[i] == ':' {
			releaseColon = true
		}
	}
	if i < 0 {
		return n, nevraError(s, "missing release (no '-' before the arch)")
	}
	dash := i
	release := s[dash+1 : dot]
	if release == "" {
		return n, nevraError(s, "empty release")
	}

	// The first ':' of version and of name, and whether each has more.
	versionColon, versionColons := -1, 0
	for i = dash - 1; i >= 0 && s[i] != '-'; i-- {
		if s[i] == ':' {
			versionColon = i
			versionColons++
		}
	}
	if i < 0 {
		return n, nevraError(s, "missing version (need name-version-release)")
	}
	dash2 := i
	nameColon, nameColons := -1, 0
	for i = dash2 - 1; i >= 0; i-- {
		if s[i] == ':' {
			nameColon = i
			nameColons++
		}
	}
	name, version := s[:dash2], s[dash2+1:dash]

	epoch, hasEpoch := "", false
	if versionColon >= 0 {
		epoch, version, hasEpoch = s[dash2+1:versionColon], s[versionColon+1:dash], true
		versionColons--
	}
	if nameColon >= 0 {
		if hasEpoch {
			return n, nevraError(s, "more than one epoch")
		}
		epoch, name, hasEpoch = s[:nameColon], s[nameColon+1:dash2], true
		nameColons--
	}
	switch {
	case name == "":
		return n, nevraError(s, "empty name")
	case version == "":
		return n, nevraError(s, "empty version")
	case nameColons > 0, versionColons > 0:
		return n, nevraError(s, "more than one epoch")
	case releaseColon:
		return n, nevraError(s, "':' in release")
	}
	if hasEpoch {
		e, err := parseEpoch(epoch)
		if err != nil {
			return n, nevraError(s, err.Error())
		}
		n.Epoch = e
	}
	n.Name, n.Version, n.Release, n.Arch = name, version, release, arch
	return n, nil
}

// hasSpace reports whether s contains a rune unicode.IsSpace accepts,
// looking at ASCII bytes directly: packages are ASCII.
func hasSpace(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= utf8.RuneSelf:
			return strings.IndexFunc(s[i:], unicode.IsSpace) >= 0
		case c == ' ' || '\t' <= c && c <= '\r':
			return true
		}
	}
	return false
}

// parseEpoch accepts only decimal digits: strconv.Atoi alone would let "+1"
// through. The bound is RPM's, whose epoch is a 32-bit tag, so that an epoch
// fits any integer column it is stored in.
func parseEpoch(s string) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("empty epoch before ':'")
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("epoch %s is not a number", quote(s))
		}
	}
	e, err := strconv.Atoi(s)
	if err != nil || e > math.MaxInt32 {
		return 0, fmt.Errorf("epoch %s is too large", quote(s))
	}
	return e, nil
}

func nevraError(s, problem string) error {
	return fmt.Errorf("package %s: %s", quote(s), problem)
}
