// Command docgen rewrites the generated parts of docs/configuration.md (the
// settings tables of the listener, loadgen and the platform mock) from the
// code; see package proving/docs. Run it from the repository root, as
// make docs does.
package main

import (
	"fmt"
	"os"

	"github.com/patchflow/patchflow/proving/docs"
)

func main() {
	old, err := os.ReadFile(docs.ConfigurationPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "docgen:", err, "(run from the repository root)")
		os.Exit(1)
	}
	doc, err := docs.Update(string(old))
	if err != nil {
		fmt.Fprintln(os.Stderr, "docgen:", err)
		os.Exit(1)
	}
	if doc == string(old) {
		fmt.Println(docs.ConfigurationPath, "is current")
		return
	}
	if err := os.WriteFile(docs.ConfigurationPath, []byte(doc), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "docgen:", err)
		os.Exit(1)
	}
	fmt.Println(docs.ConfigurationPath, "rewritten")
}
