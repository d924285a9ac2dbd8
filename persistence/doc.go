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
// What it may import: messages, internal/redact, database/sql, lib/pq,
// golang-migrate, golang.org/x/sys/unix. Never actors or clients.
package persistence
