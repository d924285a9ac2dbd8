// Command e2e runs the fault-injection suite against a real Kafka broker and
// PostgreSQL (`make e2e` starts both) and prints one line per scenario.
// It exits 1 when any scenario fails its acceptance criteria.
package main

import "github.com/patchflow/patchflow/proving/e2e"

func main() { e2e.Main() }
