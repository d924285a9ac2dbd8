-- patchflow schema, version 5: the outbox's payloads compress with lz4
-- instead of pglz. A host's remediation state (each advisory and each
-- update's NEVRA, about 13 KB of JSON) is compressed once as it is written
-- and read once by the relay; with pglz the compression was PostgreSQL's
-- largest single cost per event with the effects on (pglz_compress: 12 % of
-- its CPU in a profile of the effects benchmark). With lz4 a message
-- written, read and deleted takes 1.24 ms against 1.43 on durable
-- PostgreSQL, for a fifth more WAL (BenchmarkOutboxPayloadCompression).
--
-- lz4 needs PostgreSQL 14 or later built with it (Debian's, the official
-- images' and the cloud services' are). Elsewhere the column keeps pglz,
-- and the schema is the same in every other way. New values only: the
-- rows waiting in the outbox keep their compression until published.
--
-- The change takes the table's ACCESS EXCLUSIVE lock, which waits for every
-- open transaction that read the outbox (a relay's claim stays open while
-- it publishes: seconds, minutes when the brokers stop answering), and
-- every writer of the outbox would queue behind it. So it asks for the lock
-- 100 ms at a time, letting the writers through between tries, for about
-- two minutes; a table busy all that time keeps pglz (a NOTICE says so),
-- which only costs CPU.
DO $$
BEGIN
    IF current_setting('server_version_num')::int < 140000
       OR NOT EXISTS (SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)) THEN
        RAISE NOTICE 'the outbox payload keeps pglz: this server has no lz4';
        RETURN;
    END IF;
    PERFORM set_config('lock_timeout', '100ms', true);
    FOR attempt IN 1..400 LOOP
        BEGIN
            EXECUTE 'ALTER TABLE outbox ALTER COLUMN payload SET COMPRESSION lz4';
            RETURN;
        EXCEPTION WHEN lock_not_available THEN
            PERFORM pg_sleep(0.2);
        END;
    END LOOP;
    RAISE NOTICE 'the outbox payload keeps pglz: the outbox stayed in use for two minutes';
END $$;
