package consumer_test

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"strings"
	"testing"
)

// Every exported name of the package has a doc comment, as pkg.go.dev
// shows it: a type, function or method its own; a constant or variable its
// own or its group's.
func TestEveryExportedNameIsDocumented(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	p := doc.New(pkgs["consumer"], "github.com/patchflow/patchflow/consumer", 0)
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
