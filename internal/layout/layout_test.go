package layout_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/patchflow/patchflow"

// provingMains are the commands of the proving ground: thin mains over
// proving/ packages. Any other command is product and may not import them.
var provingMains = map[string]bool{
	"cmd/bench": true, "cmd/checker": true, "cmd/demo": true, "cmd/docgen": true, "cmd/e2e": true,
	"cmd/listener-proving": true, "cmd/loadgen": true, "cmd/platform-mock": true, "cmd/failover-reads": true, "cmd/txn-failover": true,
}

// proving reports whether a package of the module belongs to the proving
// ground (or the examples, which prove the public API from outside).
func proving(path string) bool {
	rel := strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
	return rel == "proving" || strings.HasPrefix(rel, "proving/") || strings.HasPrefix(rel, "examples/") || provingMains[rel]
}

func root(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

func goList(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = root(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", args, err, stderr.String())
	}
	return out
}

// The production listener links nothing of the proving ground and no
// in-process broker (kfake).
func TestListenerLinksNoProvingGround(t *testing.T) {
	deps := strings.Fields(string(goList(t, "-deps", "./cmd/listener")))
	if len(deps) < 50 {
		t.Fatalf("go list -deps ./cmd/listener listed %d packages: not the listener's dependencies", len(deps))
	}
	for _, d := range deps {
		if (strings.HasPrefix(d, module) && proving(d)) || strings.Contains(d, "franz-go/pkg/kfake") {
			t.Errorf("cmd/listener depends on %s", d)
		}
	}
}

// No product package imports the proving ground (tests may: they prove).
func TestProductImportsNoProvingGround(t *testing.T) {
	dec := json.NewDecoder(bytes.NewReader(goList(t, "-json=ImportPath,Imports", "./...")))
	products := 0
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if proving(p.ImportPath) {
			continue
		}
		products++
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, module) && proving(imp) {
				t.Errorf("product package %s imports %s", p.ImportPath, imp)
			}
		}
	}
	if products < 10 {
		t.Fatalf("found %d product packages: the listing is not the module's", products)
	}
}

// The proving rule itself: it must call the proving ground proving and the
// product product, or the two tests above pass for nothing.
func TestProvingRule(t *testing.T) {
	for path, want := range map[string]bool{
		module + "/proving/bench": true, module + "/cmd/demo": true, module + "/examples/httpcall": true,
		module + "/cmd/listener": false, module + "/consumer": false, module + "/actors": false, module + "/provingx": false,
	} {
		if proving(path) != want {
			t.Errorf("proving(%s) = %v, want %v", path, !want, want)
		}
	}
}

// Each command's main stays thin: at most 80 lines.
func TestMainsAreThin(t *testing.T) {
	mains, err := filepath.Glob(filepath.Join(root(t), "cmd", "*", "main.go"))
	if err != nil || len(mains) == 0 {
		t.Fatalf("no cmd/*/main.go: %v", err)
	}
	for _, m := range mains {
		b, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(b, []byte("\n")); n > 80 {
			t.Errorf("%s has %d lines; keep a main at 80 or fewer (move the work into its package)", m, n)
		}
	}
}

// No build output is committed: no file git tracks is an executable
// binary (ELF), wherever it lies.
func TestNoBuildOutputIsCommitted(t *testing.T) {
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root(t)
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	files := strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	for _, f := range files {
		fh, err := os.Open(filepath.Join(root(t), f))
		if err != nil {
			continue // deleted in the work tree
		}
		head := make([]byte, 4)
		n, _ := io.ReadFull(bufio.NewReader(fh), head)
		fh.Close()
		if n == 4 && string(head) == "\x7fELF" {
			t.Errorf("%s is a committed binary: remove it and ignore it in .gitignore", f)
		}
	}
}
