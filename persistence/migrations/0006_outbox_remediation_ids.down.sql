-- Back to schema 5. A relay of schema 5 cannot render rows by reference:
-- those a writer of schema 5 replaced with a whole message become
-- remediation rows again; the others are deleted, with their hosts'
-- remediation checksums, so that each host's next evaluation writes its
-- message again (until then the host has no message of its current state
-- waiting).
--
-- Like the up migration, it asks for the outbox's ACCESS EXCLUSIVE lock
-- 100 ms at a time, and takes it before anything else: a weaker lock
-- first (the UPDATE's, the index build's) would be raised later while a
-- relay's claim waits to delete, a deadlock, and every outbox write would
-- queue behind the wait.
DO $$
BEGIN
    PERFORM set_config('lock_timeout', '100ms', true);
    FOR attempt IN 1..400 LOOP
        BEGIN
            LOCK TABLE outbox IN ACCESS EXCLUSIVE MODE;
            UPDATE outbox SET kind = 'remediation' WHERE kind = 'remediation_ids' AND payload LIKE '{%';
            DELETE FROM remediation_state r USING system s, outbox o
                WHERE r.system_id = s.id AND o.ordering_key = s.inventory_id::text AND o.kind = 'remediation_ids';
            DELETE FROM outbox WHERE kind = 'remediation_ids';
            CREATE UNIQUE INDEX outbox_remediation_per_host ON outbox (ordering_key) WHERE kind = 'remediation';
            DROP INDEX outbox_remediation_of_host;
            ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check, ADD CONSTRAINT outbox_kind_check
                CHECK (kind IN ('remediation', 'notification', 'payload_status'));
            RETURN;
        EXCEPTION WHEN lock_not_available THEN
            PERFORM pg_sleep(0.2);
        END;
    END LOOP;
    RAISE EXCEPTION 'the outbox stayed in use for two minutes: migration 6 down could not take its lock; try again';
END $$;
