// Package persistence stores systems, their packages and their evaluations in
// PostgreSQL through database/sql and github.com/lib/pq. The schema lives in
// migrations/ (embedded, applied at start by golang-migrate).
//
// Every query is parameterised. Multi-row writes to shared tables insert in
// sorted order so concurrent transactions cannot deadlock; should a deadlock
// or serialization failure still happen, or the database be unreachable, the
// error is classified transient (messages.Transient) and the record retried.
//
// Every call returns by its context's deadline plus cancelGrace, even when
// the server stops answering (its host frozen, its packets dropped): a
// server that answers has the statement cancelled there by lib/pq's cancel
// request; one that does not has the call's connection closed under it
// (guardedConn), which fails as a lost connection (transient) and is never
// used again.
//
// The database health check (Store.Ping), which readiness and the retry
// rule take as evidence that the database serves the records, does what
// the records do, on a connection of its own: it reads system with their
// query and inserts into account and system with their insert, rolled
// back, under a statement timeout below its deadline, then commits one
// heartbeat row. So a migration's lock on system, a read-only server or
// commits that cannot complete fail it, where an empty query passed. It cannot see
// trouble confined to what it does not touch (other tables, one host's
// rows, the main pool), nor a full disk while its small writes still find
// room (see health.check).
//
// What it may import: messages, internal/redact, database/sql, lib/pq,
// golang-migrate, golang.org/x/sys/unix. Never actors or clients.
package persistence
