-- patchflow schema, version 6: a host's remediation state is written to the
-- outbox by reference. Its message names each advisory of the evaluation
-- and each update's NEVRA: 13-16 KB of JSON a host, written, compressed,
-- logged and read back once per changed evaluation. A row of kind
-- remediation_ids holds instead the advisories' and the updates' ids in
-- the dictionaries (advisory, package), about a kilobyte, and the relay
-- renders the message from them when it publishes (persistence/remediation.go):
-- a quarter less WAL per event with the effects on.
--
-- A relay of schema 5 does not know the kind: it claims such a row and
-- fails it retryably (no topic for the kind), so the row waits for a new
-- relay; the host's later messages in that round are published but not
-- deleted, and go again (duplicates under their event ids) once the kind's
-- hold ends. One unique index covers both kinds, so a host still has one
-- remediation pending, whichever writer wrote it; a writer of schema 5
-- replacing a remediation_ids row leaves its kind and writes JSON, which
-- the relay publishes as it is (a payload that starts with "{").
--
-- Like migration 5, it asks for the outbox's ACCESS EXCLUSIVE lock 100 ms
-- at a time, letting the writers through between tries, for about two
-- minutes; the swap of the index is in the same transaction, so no writer
-- sees the outbox without one.
DO $$
BEGIN
    PERFORM set_config('lock_timeout', '100ms', true);
    FOR attempt IN 1..400 LOOP
        BEGIN
            EXECUTE 'ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check, ADD CONSTRAINT outbox_kind_check
                CHECK (kind IN (''remediation'', ''remediation_ids'', ''notification'', ''payload_status''))';
            EXECUTE 'CREATE UNIQUE INDEX outbox_remediation_of_host ON outbox (ordering_key)
                WHERE kind IN (''remediation'', ''remediation_ids'')';
            EXECUTE 'DROP INDEX outbox_remediation_per_host';
            RETURN;
        EXCEPTION WHEN lock_not_available THEN
            PERFORM pg_sleep(0.2);
        END;
    END LOOP;
    RAISE EXCEPTION 'the outbox stayed in use for two minutes: migration 6 could not take its lock; try again';
END $$;
