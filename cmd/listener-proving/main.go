// Command listener-proving is the listener with the proving ground's
// additions: LISTENER_HANDLER=simulated (a handler that only waits, with
// measurement knobs) and KAFKA_BROKERS=embedded (an in-process broker). The
// benchmark, the e2e suite and the broker-less run (docs/listener.md) use it; production
// uses cmd/listener, which links neither.
package main

import (
	"os"

	"github.com/patchflow/patchflow/internal/listener"
	"github.com/patchflow/patchflow/proving/embedded"
	"github.com/patchflow/patchflow/proving/simulated"
)

func main() {
	os.Exit(listener.Main(os.Args[1:], os.Stdout, os.Stderr, simulated.Extension(&simulated.Knobs{}), embedded.Extension()))
}
