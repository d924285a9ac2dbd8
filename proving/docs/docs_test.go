package docs_test

import (
	"os"
	"strings"
	"testing"

	"github.com/patchflow/patchflow/proving/docs"
)

// docs/configuration.md's settings tables are what the code defines: a
// setting added, removed or reworded in the code without make docs fails
// here.
func TestConfigurationMatchesTheCode(t *testing.T) {
	path := "../../" + docs.ConfigurationPath
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := docs.Update(string(old))
	if err != nil {
		t.Fatalf("%v\nrun %s from the repository root", err, docs.Regenerate)
	}
	if doc != string(old) {
		line, file, code := firstDifference(string(old), doc)
		t.Fatalf("%s differs from the settings in the code at line %d:\n file: %s\n code: %s\nrun %s from the repository root",
			docs.ConfigurationPath, line, file, code, docs.Regenerate)
	}
}

// firstDifference returns the first line where a and b differ, and both
// versions of it.
func firstDifference(a, b string) (int, string, string) {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; ; i++ {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y || i >= len(la) || i >= len(lb) {
			return i + 1, x, y
		}
	}
}

// Update rewrites what lies between a block's markers and nothing else.
func TestUpdateReplacesOnlyBetweenMarkers(t *testing.T) {
	var doc strings.Builder
	doc.WriteString("# Title\n\nprose before\n")
	for _, b := range docs.Blocks() {
		doc.WriteString(b.Begin() + "\nstale table\n" + b.End() + "\n\nprose after " + b.Name + "\n")
	}
	got, err := docs.Update(doc.String())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got, "stale table") {
		t.Error("a stale table survived")
	}
	for _, want := range []string{"# Title\n\nprose before\n", "prose after listener settings\n", "| `-kafka-brokers` | `KAFKA_BROKERS` |",
		"| `-rate` | `LOADGEN_RATE` |", "| `-capacity` | `MOCK_CAPACITY` |"} {
		if !strings.Contains(got, want) {
			t.Errorf("updated document lacks %q:\n%s", want, got)
		}
	}
	if again, _ := docs.Update(got); again != got {
		t.Error("a second update changed the document")
	}
}

// A block without its markers, or with one twice, is an error: the file is
// never half rewritten.
func TestUpdateNeedsEachMarkerOnce(t *testing.T) {
	var whole strings.Builder
	for _, b := range docs.Blocks() {
		whole.WriteString(b.Begin() + "\n" + b.End() + "\n")
	}
	b := docs.Blocks()[0]
	for name, doc := range map[string]string{
		"no markers":  "# Title\n",
		"no END":      strings.Replace(whole.String(), b.End()+"\n", "", 1),
		"BEGIN twice": b.Begin() + "\n" + whole.String(),
		"END first":   strings.Replace(whole.String(), b.Begin()+"\n"+b.End(), b.End()+"\n"+b.Begin(), 1),
	} {
		if _, err := docs.Update(doc); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
