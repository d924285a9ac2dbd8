package consumer_test

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/patchflow/patchflow/internal/apisurface"
)

var updateAPI = flag.Bool("update-api", false, "rewrite testdata/api.txt from the package's exported API")

// The exported API is held against testdata/api.txt: a change to it shows
// as a diff of that file (and needs a CHANGELOG.md line), never by
// accident. go test ./consumer -run TestAPI -update-api rewrites it.
func TestAPIMatchesTheGoldenFile(t *testing.T) {
	lines, err := apisurface.List(".")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(lines, "\n") + "\n"
	if *updateAPI {
		if err := os.WriteFile("testdata/api.txt", []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("testdata/api.txt")
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("the exported API differs from testdata/api.txt (run go test ./consumer -run TestAPI -update-api, and say so in CHANGELOG.md):\n--- now\n%s--- golden\n%s", got, want)
	}
}
