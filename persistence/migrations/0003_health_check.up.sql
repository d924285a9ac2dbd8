-- patchflow schema, version 3: the row the database health check commits
-- (persistence/health.go). A rolled-back write never waits for its WAL to
-- be flushed, nor for a synchronous standby; the records' commits do, and
-- so does this one. One row for every listener, written by a one-statement
-- upsert: its row lock lasts one statement at the server, never a round
-- trip to a listener that could freeze holding it. checked_at is when a
-- check last committed.
CREATE TABLE health_check (
    id         BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (id), -- one row at most
    checked_at TIMESTAMPTZ NOT NULL
);
