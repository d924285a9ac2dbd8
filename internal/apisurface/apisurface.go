// Package apisurface lists the exported API of a package's source: one
// line per exported constant, variable, type, function and method, with its
// signature (a struct with its exported fields), sorted. Golden-file tests
// hold a public package's list against a file in its testdata, so a change
// to the surface is a visible diff (and a CHANGELOG line), never an
// accident.
package apisurface

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// List returns the exported API of the package in dir (its non-test Go
// files).
func List(dir string) ([]string, error) {
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			lines, err := declLines(fset, d)
			if err != nil {
				return nil, err
			}
			out = append(out, lines...)
		}
	}
	slices.Sort(out)
	return out, nil
}

func declLines(fset *token.FileSet, d ast.Decl) ([]string, error) {
	switch d := d.(type) {
	case *ast.FuncDecl:
		if !d.Name.IsExported() || (d.Recv != nil && !exportedReceiver(d.Recv)) {
			return nil, nil
		}
		d.Body, d.Doc = nil, nil
		s, err := render(fset, d)
		return []string{s}, err
	case *ast.GenDecl:
		var out []string
		for _, spec := range d.Specs {
			switch s := spec.(type) {
			case *ast.TypeSpec:
				if !s.Name.IsExported() {
					continue
				}
				s.Doc, s.Comment = nil, nil
				if st, ok := s.Type.(*ast.StructType); ok {
					st.Fields.List = exportedFields(st.Fields.List)
				}
				text, err := render(fset, &ast.GenDecl{Tok: token.TYPE, Specs: []ast.Spec{s}})
				if err != nil {
					return nil, err
				}
				out = append(out, oneLine(text))
			case *ast.ValueSpec:
				for _, n := range s.Names {
					if n.IsExported() {
						kind := "var"
						if d.Tok == token.CONST {
							kind = "const"
						}
						typ := ""
						if s.Type != nil {
							t, err := render(fset, s.Type)
							if err != nil {
								return nil, err
							}
							typ = " " + t
						}
						out = append(out, kind+" "+n.Name+typ)
					}
				}
			}
		}
		return out, nil
	}
	return nil, nil
}

func exportedReceiver(recv *ast.FieldList) bool {
	t := recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	id, ok := t.(*ast.Ident)
	return ok && id.IsExported()
}

// exportedFields keeps a struct's exported and embedded fields, without
// their comments or tags.
func exportedFields(fields []*ast.Field) []*ast.Field {
	var out []*ast.Field
	for _, f := range fields {
		f.Doc, f.Comment, f.Tag = nil, nil, nil
		if len(f.Names) == 0 {
			out = append(out, f)
			continue
		}
		var names []*ast.Ident
		for _, n := range f.Names {
			if n.IsExported() {
				names = append(names, n)
			}
		}
		if len(names) > 0 {
			f.Names = names
			out = append(out, f)
		}
	}
	return out
}

func render(fset *token.FileSet, node any) (string, error) {
	var b bytes.Buffer
	if err := printer.Fprint(&b, fset, node); err != nil {
		return "", fmt.Errorf("print: %w", err)
	}
	return b.String(), nil
}

// oneLine folds a declaration's lines into one, fields joined by "; ".
func oneLine(s string) string {
	var parts []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, strings.Join(strings.Fields(l), " "))
		}
	}
	out := strings.Join(parts, "; ")
	out = strings.ReplaceAll(out, "{; ", "{ ")
	return strings.ReplaceAll(out, "; }", " }")
}
