// Package persistence stores systems, their packages and their evaluations in
// PostgreSQL through database/sql and github.com/lib/pq. The schema lives in
// migrations/ (embedded, applied at start by golang-migrate).
//
// Every query is parameterised. Multi-row writes to shared tables insert in
// sorted order so concurrent transactions cannot deadlock; should a deadlock
// or serialization failure still happen, or the database be unreachable, the
// error is classified transient (messages.Transient) and the record retried.
//
// What it may import: messages, internal/redact, database/sql, lib/pq,
// golang-migrate. Never actors or clients.
package persistence
