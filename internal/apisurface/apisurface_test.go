package apisurface_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patchflow/patchflow/internal/apisurface"
)

// Only what another package can name is listed: exported declarations,
// methods of exported types, exported fields; tests and bodies are not.
func TestListsOnlyTheExportedSurface(t *testing.T) {
	dir := t.TempDir()
	src := `package p

import "time"

// A is exported.
type A struct {
	Name  string ` + "`json:\"name\"`" + `
	inner int
	Took  time.Duration // comment
}

type hidden struct{ X int }

func (a *A) Do(n int) error { return nil }
func (h hidden) Do() {}
func New() *A { return nil }
func helper() {}

const Max, min = 3, 1

var Default = New()
`
	test := "package p\n\nfunc Exported() {}\n"
	for name, text := range map[string]string{"p.go": src, "p_test.go": test} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := apisurface.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"const Max",
		"func (a *A) Do(n int) error",
		"func New() *A",
		"type A struct { Name string; Took time.Duration }",
		"var Default",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
