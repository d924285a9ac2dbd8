// Package clients holds the listener's HTTP clients for the services it
// depends on: VMaaS (package updates and errata for an installed package
// list) and the host inventory (a host's system profile).
//
// Both clients share one retry policy (retry.go): a per-attempt timeout,
// exponential backoff with full jitter on 429, 502, 503, 504 and on
// connection errors or timeouts, Retry-After honoured up to the backoff cap,
// and response bodies always drained and closed so connections are reused.
// Every error they return is classified for the pipeline with
// messages.Permanent (the request itself is wrong: retrying the record cannot
// help) or messages.Transient (the dependency failed: retry the record later),
// except a cancelled caller context, which is returned unclassified so that
// messages.ClassOf reports it as cancelled.
//
// What it may import: the standard library, github.com/hashicorp/golang-lru/v2
// (the VMaaS answer cache), messages (the error classes) and internal/redact
// (a base URL's password is masked in every error). It never imports actors
// or persistence: callers hand it plain values and get plain values back.
package clients
