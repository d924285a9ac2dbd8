package consumer_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// outsideMain is a program of a module other than this one: it uses only
// the public consumer package and the proving ground's in-process broker,
// and copies nothing from this repository. Its glue (between the markers)
// is what a Go team writes to run its own handler.
const outsideMain = `package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/patchflow/patchflow/consumer"
	"github.com/patchflow/patchflow/proving/embedded"
)

func main() {
	broker, err := embedded.Start(2, "orders")
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	defer broker.Close()
	if err := broker.Produce("orders", "a", "1", "b", "2", "a", "3", "c", "poison"); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// glue begins
	handler := consumer.HandlerFunc(func(ctx context.Context, r *consumer.Record) error {
		if string(r.Value) == "poison" {
			return consumer.Permanent(fmt.Errorf("cannot parse %q", r.Value))
		}
		fmt.Printf("handled %s=%s\n", r.Key, r.Value)
		return nil
	})
	c, err := consumer.New(consumer.Config{Brokers: broker.Addrs(), Topic: "orders", Group: "outside"}, handler)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	err = c.Run(ctx)
	// glue ends
	s := c.Stats()
	fmt.Printf("run %v, succeeded %d, dead-lettered %d\n", err, s.Succeeded, s.DeadLettered)
}
`

// A module outside this repository (a replace directive to this checkout)
// builds and runs its own handler through the public package against the
// in-process broker, with at most 15 lines of glue.
func TestAModuleOutsideTheRepositoryRunsItsOwnHandler(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module of its own")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	main := strings.Replace(outsideMain, "	err = c.Run(ctx)\n", "	go stopWhenDone(c, cancel)\n	err = c.Run(ctx)\n", 1) +
		"\nfunc stopWhenDone(c *consumer.Consumer, stop context.CancelFunc) {\n" +
		"\tfor s := c.Stats(); s.Succeeded+s.DeadLettered < 4; s = c.Stats() {\n\t\ttime.Sleep(10 * time.Millisecond)\n\t}\n\tstop()\n}\n"
	gomod := "module example.com/outside\n\ngo 1.26\n\nrequire github.com/patchflow/patchflow v0.0.0\n\nreplace github.com/patchflow/patchflow => " + root + "\n"
	for name, text := range map[string]string{"main.go": main, "go.mod": gomod} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	glue := strings.Split(outsideMain, "// glue begins\n")[1]
	glue = strings.Split(glue, "\t// glue ends")[0]
	if n := strings.Count(glue, "\n"); n > 15 {
		t.Errorf("the glue is %d lines, want at most 15:\n%s", n, glue)
	}
	gocmd := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	gocmd("mod", "tidy")
	out := gocmd("run", ".")
	for _, want := range []string{"handled a=1", "handled a=3", "handled b=2", "run <nil>, succeeded 3, dead-lettered 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "handled a=1") > strings.Index(out, "handled a=3") {
		t.Errorf("key a's records ran out of order:\n%s", out)
	}
}

// The ledger example (two topics, batches to PostgreSQL, results, traces)
// builds as a module of its own, from its files alone.
func TestTheLedgerExampleBuildsOutsideTheRepository(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module of its own")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"main.go", "ledger.go"} {
		text, err := os.ReadFile(filepath.Join(root, "examples", "ledger", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), text, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gomod := "module example.com/ledger\n\ngo 1.26\n\nrequire github.com/patchflow/patchflow v0.0.0\n\nreplace github.com/patchflow/patchflow => " + root + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"mod", "tidy"}, {"build", "-o", os.DevNull, "."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
