package layout_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// libraryDirs are the library's packages: package consumer and what it
// runs on. Their errors, hints, logs, metric help and status page speak
// to any user of the library, so they must not name the patch-management
// product's settings, tools, services or documents.
var libraryDirs = []string{"consumer", "actors", "messages", "internal/telemetry", "internal/pipeline"}

// productWords are the product's words: its settings' prefixes, its tools,
// its dependencies and its domain.
var productWords = regexp.MustCompile(`LISTENER_|KAFKA_[A-Z]|bin/|loadgen|make [a-z]|(?i:vmaas)|(?i:inventory)|docs/deploy\.md|patch-management|\bevaluat|\bhosts?\b|\blistener`)

// productFile: the outbox relay lives in package actors (it is an actor)
// but belongs to the product; the library never runs it.
func productFile(path string) bool { return strings.Contains(filepath.Base(path), "outbox") }

// Every string literal of the library's non-test files is free of the
// product's words.
func TestTheLibrarySpeaksNoProductWords(t *testing.T) {
	base := root(t)
	seen := 0
	for _, dir := range libraryDirs {
		err := filepath.WalkDir(filepath.Join(base, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || productFile(path) {
				return err
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				seen++
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					s = lit.Value
				}
				if w := productWords.FindString(strings.ReplaceAll(s, "host:port", "")); w != "" {
					rel, _ := filepath.Rel(base, fset.Position(lit.Pos()).Filename)
					t.Errorf("%s:%d names the product (%q): %.120s", rel, fset.Position(lit.Pos()).Line, w, s)
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if seen < 500 {
		t.Fatalf("read only %d string literals: the walk missed the library", seen)
	}
}
