package layout_test

// Review of 3c4ecda: what TestTheLibrarySpeaksNoProductWords misses.

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Package messages is the library's too (the dead-letter envelope, the
// error classes and reasons the consumer's handlers return), and the
// consumer imports it, but libraryDirs leaves it out: its string literals
// are not read.
func TestReview39MessagesSpeaksNoProductWords(t *testing.T) {
	base := root(t)
	err := filepath.WalkDir(filepath.Join(base, "messages"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") ||
			strings.HasSuffix(path, ".pb.go") || productFile(path) {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				s, _ := strconv.Unquote(lit.Value)
				if w := productWords.FindString(s); w != "" {
					t.Errorf("%s:%d names the product (%q): %.120s", filepath.Base(path), fset.Position(lit.Pos()).Line, w, s)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The godoc of the library's exported names speaks to its users as much
// as its strings do; the test reads no comment.
func TestReview39LibraryGodocSpeaksNoProductWords(t *testing.T) {
	base := root(t)
	for _, dir := range []string{"consumer", "messages"} {
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, filepath.Join(base, dir), func(fi os.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go") && !productFile(fi.Name())
		}, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pkgs {
			dp := doc.New(p, "x/"+dir, 0)
			check := func(name, text string) {
				for _, line := range strings.Split(text, "\n") {
					if w := productWords.FindString(strings.ReplaceAll(line, "host:port", "")); w != "" {
						t.Errorf("%s.%s's doc names the product (%q): %s", dir, name, w, strings.TrimSpace(line))
					}
				}
			}
			check("package", dp.Doc)
			for _, c := range dp.Consts {
				check(strings.Join(c.Names, ","), c.Doc)
				for _, s := range c.Decl.Specs {
					if vs, ok := s.(*ast.ValueSpec); ok && vs.Doc != nil {
						check(vs.Names[0].Name, vs.Doc.Text())
					}
				}
			}
			for _, ty := range dp.Types {
				check(ty.Name, ty.Doc)
				for _, s := range ty.Decl.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok {
						if st, ok := ts.Type.(*ast.StructType); ok {
							for _, fl := range st.Fields.List {
								if fl.Doc != nil && len(fl.Names) > 0 && ast.IsExported(fl.Names[0].Name) {
									check(ty.Name+"."+fl.Names[0].Name, fl.Doc.Text())
								}
							}
						}
					}
				}
				for _, f := range ty.Funcs {
					check(f.Name, f.Doc)
				}
				for _, f := range ty.Methods {
					check(ty.Name+"."+f.Name, f.Doc)
				}
				for _, c := range ty.Consts {
					for _, s := range c.Decl.Specs {
						if vs, ok := s.(*ast.ValueSpec); ok && vs.Doc != nil && ast.IsExported(vs.Names[0].Name) {
							check(vs.Names[0].Name, vs.Doc.Text())
						}
					}
				}
			}
			for _, f := range dp.Funcs {
				check(f.Name, f.Doc)
			}
		}
	}
}
