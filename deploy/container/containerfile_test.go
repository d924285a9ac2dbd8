// Package container holds the listener's Containerfiles; its test keeps the
// image `make image` builds (Containerfile.local) the same as the one users
// build (Containerfile) but for where the binary and the base come from.
package container

import (
	"os"
	"strings"
	"testing"
)

const marker = "# --- runtime: the same in Containerfile and Containerfile.local from here down ---"

// runtimeOf returns what follows the marker in the named file.
func runtimeOf(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), marker)
	if !ok {
		t.Fatalf("%s has no line %q", name, marker)
	}
	return after
}

func TestTheTwoImagesShareTheirRuntime(t *testing.T) {
	users, local := runtimeOf(t, "Containerfile"), runtimeOf(t, "Containerfile.local")
	if users != local {
		t.Fatalf("Containerfile and Containerfile.local differ below the runtime marker:\n--- Containerfile\n%s\n--- Containerfile.local\n%s", users, local)
	}
	for _, want := range []string{"USER 65532:65532", `ENTRYPOINT ["/listener"]`, "org.opencontainers.image.revision"} {
		if !strings.Contains(users, want) {
			t.Errorf("the runtime has no %q", want)
		}
	}
}

// Above the marker Containerfile.local may only say where things come
// from: FROM scratch and COPY, nothing that runs.
func TestTheLocalImageOnlyCopies(t *testing.T) {
	b, err := os.ReadFile("Containerfile.local")
	if err != nil {
		t.Fatal(err)
	}
	head, _, _ := strings.Cut(string(b), marker)
	for line := range strings.SplitSeq(head, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if line != "FROM scratch" && !strings.HasPrefix(line, "COPY ") {
			t.Errorf("Containerfile.local above the runtime: %q (only FROM scratch and COPY belong there)", line)
		}
	}
}
