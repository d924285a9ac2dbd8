package listener_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/patchflow/patchflow/internal/listener"
	"github.com/patchflow/patchflow/internal/version"
)

// -version prints the build and exits 0 before reading any setting (an
// image's build check runs it with no environment at all).
func TestVersionFlagPrintsTheBuild(t *testing.T) {
	defer func(v, r string) { version.Version, version.Revision = v, r }(version.Version, version.Revision)
	version.Version, version.Revision = "v1.2.3", "0123abcd"
	t.Setenv("KAFKA_BROKERS", "") // would be refused were the settings read
	var out, errs bytes.Buffer
	if code := listener.Main([]string{"-version"}, &out, &errs); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errs.String())
	}
	if got := out.String(); !strings.HasPrefix(got, "patchflow v1.2.3 (revision 0123abcd, go") {
		t.Fatalf("-version printed %q", got)
	}
}
