package consumer_test

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// Every exported name of the package has a doc comment, as pkg.go.dev
// shows it: a type, function or method its own; a constant or variable its
// own or its group's.
func TestEveryExportedNameIsDocumented(t *testing.T) {
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	p, err := doc.NewFromFiles(fset, files, "github.com/patchflow/patchflow/consumer")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(p.Doc) == "" {
		t.Error("the package has no doc comment")
	}
	undocumented := func(kind, name, text string) {
		if strings.TrimSpace(text) == "" {
			t.Errorf("%s %s has no doc comment", kind, name)
		}
	}
	values := func(vs []*doc.Value) {
		for _, v := range vs {
			for _, spec := range v.Decl.Specs {
				s := spec.(*ast.ValueSpec)
				for _, n := range s.Names {
					if n.IsExported() && v.Doc == "" && s.Doc.Text() == "" && s.Comment.Text() == "" {
						t.Errorf("%s has no doc comment, nor has its group", n.Name)
					}
				}
			}
		}
	}
	values(p.Consts)
	values(p.Vars)
	for _, f := range p.Funcs {
		undocumented("func", f.Name, f.Doc)
	}
	for _, typ := range p.Types {
		undocumented("type", typ.Name, typ.Doc)
		values(typ.Consts)
		values(typ.Vars)
		for _, f := range typ.Funcs {
			undocumented("func", f.Name, f.Doc)
		}
		for _, m := range typ.Methods {
			undocumented("method", typ.Name+"."+m.Name, m.Doc)
		}
	}
	if len(p.Types) < 10 {
		t.Fatalf("read %d types: the package was not read", len(p.Types))
	}
}
