// Package version says which build of patchflow is running: the version and
// revision the build stamped (-ldflags -X, as make build and the image do),
// else what the Go toolchain recorded from the checkout it built in. It
// imports nothing of patchflow, so every binary and package may use it.
package version

import (
	"fmt"
	"runtime/debug"
)

// Stamped by the build:
//
//	-ldflags "-X github.com/patchflow/patchflow/internal/version.Version=v1.2.3
//	          -X github.com/patchflow/patchflow/internal/version.Revision=<commit>"
var (
	Version  string
	Revision string
)

// Info is one build's identity.
type Info struct {
	Version   string // a tag, a pseudo-version, or "(devel)" when unknown
	Revision  string // the commit, with "-dirty" when the tree had changes; "unknown" when not recorded
	GoVersion string
}

// Get returns this build's identity: the stamped values where set, the
// toolchain's record of the module and its checkout otherwise.
func Get() Info {
	i := Info{Version: Version, Revision: Revision, GoVersion: "unknown"}
	bi, ok := debug.ReadBuildInfo()
	if ok {
		i.GoVersion = bi.GoVersion
		if i.Version == "" && bi.Main.Version != "" {
			i.Version = bi.Main.Version
		}
		if i.Revision == "" {
			var rev string
			var dirty bool
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					rev = s.Value
				case "vcs.modified":
					dirty = s.Value == "true"
				}
			}
			if rev != "" && dirty {
				rev += "-dirty"
			}
			i.Revision = rev
		}
	}
	if i.Version == "" {
		i.Version = "(devel)"
	}
	if i.Revision == "" {
		i.Revision = "unknown"
	}
	return i
}

// String is the line `listener -version` prints.
func (i Info) String() string {
	return fmt.Sprintf("patchflow %s (revision %s, %s)", i.Version, i.Revision, i.GoVersion)
}
