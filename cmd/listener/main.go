// Command listener consumes inventory events from Kafka and handles each one
// through the actor pipeline, committing offsets only past finished records.
// Every setting is an environment variable and a flag; run with -h for the
// list, or see docs/configuration.md. SIGTERM or SIGINT drains and exits 0;
// a second one during the drain exits at once with 128 + its number.
//
// This is the production build: it links neither the in-process broker nor
// the simulated handler (cmd/listener-proving does).
package main

import (
	"os"

	"github.com/patchflow/patchflow/internal/listener"
)

func main() {
	os.Exit(listener.Main(os.Args[1:], os.Stdout, os.Stderr))
}
