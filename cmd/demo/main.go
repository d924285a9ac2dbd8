// Command demo runs patchflow end to end on one machine: an in-process
// broker, the platform mock, 20,000 realistic inventory events, the listener
// with its defaults against PostgreSQL (DATABASE_URL; `make demo` starts a
// throwaway one), live progress and a summary that checks every host.
package main

import "github.com/patchflow/patchflow/proving/demo"

func main() { demo.Main() }
