// Package docs generates the parts of docs/configuration.md that the code
// defines: the settings tables of the listener, loadgen and the platform
// mock, each between a BEGIN and an END marker comment, from the same
// settings.Set that `-h` prints. The prose around them is written by hand.
// cmd/docgen rewrites them (make docs); this package's test fails while the
// file differs from what the code produces.
package docs

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/patchflow/patchflow/internal/listener"
	"github.com/patchflow/patchflow/internal/settings"
	"github.com/patchflow/patchflow/proving/embedded"
	"github.com/patchflow/patchflow/proving/loadgen"
	"github.com/patchflow/patchflow/proving/platform"
	"github.com/patchflow/patchflow/proving/simulated"
)

// ConfigurationPath is the generated file, from the repository root.
const ConfigurationPath = "docs/configuration.md"

// Regenerate is the command that rewrites the generated parts.
const Regenerate = "make docs (go run ./cmd/docgen)"

// Block is one generated part: a program's settings table.
type Block struct {
	Name   string // in the markers: "listener settings"
	Source string // where its settings are defined
	Set    func() *settings.Set
}

// Blocks are the generated parts of docs/configuration.md, in file order.
func Blocks() []Block {
	return []Block{
		{"listener settings", "internal/listener/config.go", productSettings},
		{"listener-proving settings", "proving/simulated/extension.go and proving/embedded/embedded.go", provingSettings},
		{"loadgen settings", "proving/loadgen/config.go", func() *settings.Set { return help(loadgen.Parse) }},
		{"platform-mock settings", "proving/platform/config.go", func() *settings.Set { return help(platform.ParseMockConfig) }},
	}
}

// provingSettings are the settings cmd/listener-proving adds to the
// listener's: only those, so the table says what the production build lacks.
func provingSettings() *settings.Set {
	_, all, _ := listener.Parse([]string{"-h"}, func(string) (string, bool) { return "", false },
		simulated.Extension(&simulated.Knobs{}), embedded.Extension())
	return all.Without(productSettings())
}

// productSettings are the production listener's settings (cmd/listener).
func productSettings() *settings.Set {
	_, s, _ := listener.Parse([]string{"-h"}, func(string) (string, bool) { return "", false })
	return s
}

// help returns the set a program's parser builds for -h: every setting at
// its default.
func help[C any](parse func([]string, func(string) (string, bool)) (C, *settings.Set, error)) *settings.Set {
	_, s, _ := parse([]string{"-h"}, func(string) (string, bool) { return "", false })
	return s
}

// Begin is the marker line before block b.
func (b Block) Begin() string {
	return fmt.Sprintf("<!-- BEGIN GENERATED: %s, from %s; edit there and run %s -->", b.Name, b.Source, Regenerate)
}

// End is the marker line after block b.
func (b Block) End() string { return fmt.Sprintf("<!-- END GENERATED: %s -->", b.Name) }

// Render is block b between its markers.
func (b Block) Render() string {
	var buf bytes.Buffer
	b.Set().PrintMarkdown(&buf)
	return b.Begin() + "\n\n" + buf.String() + "\n" + b.End()
}

// Update returns doc with every block's part replaced by what the code
// produces now, everything outside the markers unchanged. Each block's
// markers must be there once each, as whole lines, BEGIN before END;
// a BEGIN line may be out of date (another source, another command) and is
// rewritten, as long as it names the block.
func Update(doc string) (string, error) {
	lines := strings.SplitAfter(doc, "\n")
	var out strings.Builder
	for _, b := range Blocks() {
		begin := fmt.Sprintf("<!-- BEGIN GENERATED: %s,", b.Name)
		i, err := find(lines, func(l string) bool { return strings.HasPrefix(l, begin) }, b.Name+" BEGIN")
		if err != nil {
			return "", err
		}
		j, err := find(lines, func(l string) bool { return strings.TrimSpace(l) == b.End() }, b.Name+" END")
		if err != nil {
			return "", err
		}
		if j < i {
			return "", fmt.Errorf("%s: the END marker of %s comes before its BEGIN marker", ConfigurationPath, b.Name)
		}
		for _, l := range lines[:i] {
			out.WriteString(l)
		}
		out.WriteString(b.Render())
		rest := lines[j]
		out.WriteString(rest[len(strings.TrimRight(rest, "\n")):]) // the END line's newline, if it had one
		lines = lines[j+1:]
	}
	for _, l := range lines {
		out.WriteString(l)
	}
	return out.String(), nil
}

// find returns the index of the one line that matches.
func find(lines []string, match func(string) bool, what string) (int, error) {
	at := -1
	for i, l := range lines {
		if match(strings.TrimRight(l, "\n")) {
			if at >= 0 {
				return 0, fmt.Errorf("%s: the %s marker is there twice", ConfigurationPath, what)
			}
			at = i
		}
	}
	if at < 0 {
		return 0, fmt.Errorf("%s: no %s marker (blocks must come in the order of docs.Blocks)", ConfigurationPath, what)
	}
	return at, nil
}
