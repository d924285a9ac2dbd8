package version

import (
	"strings"
	"testing"
)

// What the build stamps wins over the toolchain's record.
func TestStampedValuesWin(t *testing.T) {
	defer func(v, r string) { Version, Revision = v, r }(Version, Revision)
	Version, Revision = "v9.8.7", "abc123"
	i := Get()
	if i.Version != "v9.8.7" || i.Revision != "abc123" {
		t.Fatalf("Get() = %+v, want the stamped version and revision", i)
	}
	if s := i.String(); !strings.Contains(s, "v9.8.7") || !strings.Contains(s, "abc123") {
		t.Fatalf("String() = %q, want both stamps in it", s)
	}
}

// Unstamped, a test binary still names itself: never an empty label.
func TestUnstampedValuesAreNeverEmpty(t *testing.T) {
	defer func(v, r string) { Version, Revision = v, r }(Version, Revision)
	Version, Revision = "", ""
	i := Get()
	if i.Version == "" || i.Revision == "" || i.GoVersion == "" {
		t.Fatalf("Get() = %+v, want no empty field", i)
	}
}
