// Package layout holds no code, only the tests that keep the repository's
// shape: what ships (the consumer, the actors, the domain, the listener
// runtime and its commands) never imports what proves it (proving/ and
// examples/), the production listener links no in-process broker, the
// commands stay thin, and no build output is committed.
package layout
