package inventory_test

import (
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/patchflow/patchflow/inventory"
)

func TestParseNEVRA(t *testing.T) {
	cases := []struct {
		in        string
		want      inventory.NEVRA
		canonical string
	}{
		{"kernel-0:4.18.0-305.el8.x86_64",
			inventory.NEVRA{Name: "kernel", Epoch: 0, Version: "4.18.0", Release: "305.el8", Arch: "x86_64"},
			"kernel-0:4.18.0-305.el8.x86_64"},
		{"python3-libs-0:3.6.8-37.el8.x86_64",
			inventory.NEVRA{Name: "python3-libs", Epoch: 0, Version: "3.6.8", Release: "37.el8", Arch: "x86_64"},
			"python3-libs-0:3.6.8-37.el8.x86_64"},
		{"bash-4.4.20-1.el8_4.x86_64",
			inventory.NEVRA{Name: "bash", Version: "4.4.20", Release: "1.el8_4", Arch: "x86_64"},
			"bash-0:4.4.20-1.el8_4.x86_64"},
		{"1:java-1.8.0-openjdk-headless-1.8.0.292.b10-1.el8_4.x86_64",
			inventory.NEVRA{Name: "java-1.8.0-openjdk-headless", Epoch: 1, Version: "1.8.0.292.b10", Release: "1.el8_4", Arch: "x86_64"},
			"java-1.8.0-openjdk-headless-1:1.8.0.292.b10-1.el8_4.x86_64"},
		{"java-1.8.0-openjdk-headless-1:1.8.0.292.b10-1.el8_4.x86_64",
			inventory.NEVRA{Name: "java-1.8.0-openjdk-headless", Epoch: 1, Version: "1.8.0.292.b10", Release: "1.el8_4", Arch: "x86_64"},
			"java-1.8.0-openjdk-headless-1:1.8.0.292.b10-1.el8_4.x86_64"},
		{"perl-IO-Socket-SSL-2.066-4.module+el8.3.0+6446+594cad75.noarch",
			inventory.NEVRA{Name: "perl-IO-Socket-SSL", Version: "2.066", Release: "4.module+el8.3.0+6446+594cad75", Arch: "noarch"},
			"perl-IO-Socket-SSL-0:2.066-4.module+el8.3.0+6446+594cad75.noarch"},
		{"libstdc++-8.4.1-1.el8.i686",
			inventory.NEVRA{Name: "libstdc++", Version: "8.4.1", Release: "1.el8", Arch: "i686"},
			"libstdc++-0:8.4.1-1.el8.i686"},
		{"tzdata-2:2021a-1.el8.noarch",
			inventory.NEVRA{Name: "tzdata", Epoch: 2, Version: "2021a", Release: "1.el8", Arch: "noarch"},
			"tzdata-2:2021a-1.el8.noarch"},
		{"a-1-1.x",
			inventory.NEVRA{Name: "a", Version: "1", Release: "1", Arch: "x"},
			"a-0:1-1.x"},
		{"vim-enhanced-2147483647:8.0.1763-15.el8.x86_64",
			inventory.NEVRA{Name: "vim-enhanced", Epoch: 2147483647, Version: "8.0.1763", Release: "15.el8", Arch: "x86_64"},
			"vim-enhanced-2147483647:8.0.1763-15.el8.x86_64"},
		{"007:bond-1-1.x",
			inventory.NEVRA{Name: "bond", Epoch: 7, Version: "1", Release: "1", Arch: "x"},
			"bond-7:1-1.x"},
	}
	for _, c := range cases {
		got, err := inventory.ParseNEVRA(c.in)
		if err != nil {
			t.Errorf("ParseNEVRA(%q): %v", c.in, err)
			continue
		}
		if got != c.want {
			t.Errorf("ParseNEVRA(%q) = %+v, want %+v", c.in, got, c.want)
		}
		if s := got.String(); s != c.canonical {
			t.Errorf("ParseNEVRA(%q).String() = %q, want %q", c.in, s, c.canonical)
		}
	}
}

func TestParseNEVRARejects(t *testing.T) {
	cases := []struct{ in, problem string }{
		{"", "empty string"},
		{"kernel", "missing arch"},
		{"kernel-4.18.0-305", "missing arch"},
		{"kernel-0:4.18.0-305.el8.", "empty arch"},
		{"kernel.x86_64", "missing release"},
		{"kernel-4.18.0.x86_64", "missing version"},
		{"kernel-0:4.18.0-.x86_64", "empty release"},
		{"kernel-0:-305.el8.x86_64", "empty version"},
		{"kernel-:4.18.0-305.el8.x86_64", "empty epoch"},
		{":kernel-4.18.0-305.el8.x86_64", "empty epoch"},
		{"-0:4.18.0-305.el8.x86_64", "empty name"},
		{"0:-4.18.0-305.el8.x86_64", "empty name"},
		{"kernel-x:4.18.0-305.el8.x86_64", "not a number"},
		{"kernel-+1:4.18.0-305.el8.x86_64", "not a number"},
		{"kernel-2147483648:4.18.0-305.el8.x86_64", "too large"},
		{"kernel-99999999999999999999:4.18.0-305.el8.x86_64", "too large"},
		{"1:kernel-2:4.18.0-305.el8.x86_64", "more than one epoch"},
		{"kernel-1:2:4.18.0-305.el8.x86_64", "more than one epoch"},
		{"1:2:kernel-4.18.0-305.el8.x86_64", "more than one epoch"},
		{"kernel-0:4.18.0-305:1.el8.x86_64", "':' in release"},
		{"kernel-0:4.18.0-305.el8.x86:64", "missing arch"},
		{"kernel-0:4.18.0-305.el8.x86_64 ", "white space"},
		{"kernel 0:4.18.0-305.el8.x86_64", "white space"},
		{"kernel\v0:4.18.0-305.el8.x86_64", "white space"},
		{"kernel-0:4.18.0-305.el8.x86_64\r", "white space"},
		{"kernel-0:4.18.0-305.el8.x86_64\u00a0", "white space"},      // no-break space
		{"kernel-0:4.18.0-305.el8.x86_64\u0085", "white space"},      // next line
		{"k\u00e9rnel\u2003-0:4.18.0-305.el8.x86_64", "white space"}, // em space after a letter that is not ASCII
	}
	for _, c := range cases {
		got, err := inventory.ParseNEVRA(c.in)
		if err == nil {
			t.Errorf("ParseNEVRA(%q) = %+v, want an error about %s", c.in, got, c.problem)
			continue
		}
		if !strings.Contains(err.Error(), c.problem) {
			t.Errorf("ParseNEVRA(%q): %q does not say %q", c.in, err, c.problem)
		}
		if got != (inventory.NEVRA{}) {
			t.Errorf("ParseNEVRA(%q) returned %+v with its error", c.in, got)
		}
	}
}

// validNEVRA draws NEVRAs within the documented grammar: names may hold
// dashes and dots, version and release dots but no dashes, arch neither.
func validNEVRA() *rapid.Generator[inventory.NEVRA] {
	return rapid.Custom(func(t *rapid.T) inventory.NEVRA {
		return inventory.NEVRA{
			Name:    rapid.StringMatching(`[A-Za-z0-9_+][A-Za-z0-9_+.-]{0,30}`).Draw(t, "name"),
			Epoch:   rapid.IntRange(0, 1<<31-1).Draw(t, "epoch"),
			Version: rapid.StringMatching(`[A-Za-z0-9_+~^.]{1,15}`).Draw(t, "version"),
			Release: rapid.StringMatching(`[A-Za-z0-9_+~^.]{1,25}`).Draw(t, "release"),
			Arch:    rapid.SampledFrom([]string{"x86_64", "noarch", "i686", "aarch64", "ppc64le", "s390x", "src"}).Draw(t, "arch"),
		}
	})
}

func TestNEVRARoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := validNEVRA().Draw(t, "nevra")
		got, err := inventory.ParseNEVRA(n.String())
		if err != nil {
			t.Fatalf("ParseNEVRA(%q): %v", n.String(), err)
		}
		if got != n {
			t.Fatalf("ParseNEVRA(%q) = %+v, want %+v", n.String(), got, n)
		}
	})
}

// Whatever string parses, its canonical form must parse to the same NEVRA:
// otherwise storing String() and reading it back would change the package.
func TestNEVRACanonicalFormIsStable(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.StringMatching(`[a-c0-9:.-]{0,16}`).Draw(t, "s")
		n, err := inventory.ParseNEVRA(s)
		if err != nil {
			return
		}
		again, err := inventory.ParseNEVRA(n.String())
		if err != nil || again != n {
			t.Fatalf("%q parsed to %+v, whose String %q parses to %+v, %v", s, n, n.String(), again, err)
		}
	})
}

func BenchmarkParseNEVRA(b *testing.B) {
	pkgs := []string{"kernel-0:4.18.0-305.el8.x86_64", "python3-libs-3.6.8-37.el8.x86_64", "NetworkManager-1:1.30.0-7.el8.x86_64",
		"pkg-0042-0:3.4.0-7.el8.x86_64", "0:bash-4.4.20-1.el8_4.x86_64", "glibc-langpack-en-2.28-151.el8.x86_64"}
	for _, c := range []struct {
		name  string
		parse func(string) (inventory.NEVRA, error)
	}{{"legacy", inventory.LegacyParseNEVRA}, {"onepass", inventory.ParseNEVRA}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			defer measureCPU(b)()
			for b.Loop() {
				for _, p := range pkgs {
					if _, err := c.parse(p); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// FuzzParseNEVRAMatchesLegacy: the one-pass ParseNEVRA gives exactly what
// the part-by-part one gave, package or error, for any string.
func FuzzParseNEVRAMatchesLegacy(f *testing.F) {
	for _, s := range []string{"", "kernel-0:4.18.0-305.el8.x86_64", "0:bash-4.4.20-1.el8_4.x86_64", "a-b-c", "a.b", "-.", "--.x",
		"a-1:2:3-4.x", "1:a:b-2-3.x", "a-1-2:3.x", "a-1-2.x:y", "a-1-2.x-y", "a-1-2.", ":a-1-2.x", "a-:1-2.x", "a-1:-2.x",
		"a-1--2.x", "a-1-.x", "k\u00e9-1-2.x", "a-1-2.x ", "a\u00a0-1-2.x", "\xff-1-2.x", "a-99999999999999999999:1-2.x", "a-+1:1-2.x",
		"1:2:a-1-2.x", "a:b:c-1-2.x", "x-1:2-3.y.z", "a.b.c-1-2.x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, gotErr := inventory.ParseNEVRA(s)
		want, wantErr := inventory.LegacyParseNEVRA(s)
		if got != want || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Errorf("ParseNEVRA(%q) = %+v, %v; before %+v, %v", s, got, gotErr, want, wantErr)
		}
	})
}

// EVRA is String without the name and its dash: what the listener stores
// beside the name, built without building String first.
func TestEVRAIsStringWithoutTheName(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := validNEVRA().Draw(t, "nevra")
		if got, want := n.EVRA(), strings.TrimPrefix(n.String(), n.Name+"-"); got != want {
			t.Fatalf("EVRA() = %q, want %q", got, want)
		}
	})
}
