-- patchflow schema, version 6: advisory_notified loses its two foreign
-- keys. Every id it holds was read from account and advisory after those
-- rows committed (the id cache caches only committed rows), and nothing
-- deletes an account or an advisory; system's advisory arrays hold the
-- same ids without a key since version 2.
--
-- What the keys cost: each row inserted checked both, taking a KEY SHARE
-- lock on its account's row and its advisory's. Every new org's first
-- hosts notify its installable advisories, dozens a host, and the
-- advisories are the same few hundred rows for every org, so concurrent
-- writers locked the same rows: every lock a MultiXact and a WAL record on
-- the advisory's page. Writing new hosts of new orgs (75 pairs for one of
-- two hosts), 8 writers on durable PostgreSQL: 2.39 ms of PostgreSQL's CPU
-- per event with the keys, 1.96 without, in three alternating rounds
-- (546 against 634 events/s).
--
-- Dropping a foreign key takes the ACCESS EXCLUSIVE lock of both tables it
-- joins, and every event reads account and advisory: a lock that waits
-- would queue every writer behind it. So, as migration 5 does, it asks
-- 100 ms at a time for about two minutes, and a database that stays busy
-- all that time keeps the keys (a NOTICE says so): they only cost CPU.
DO $$
BEGIN
    PERFORM set_config('lock_timeout', '100ms', true);
    FOR attempt IN 1..400 LOOP
        BEGIN
            ALTER TABLE advisory_notified
                DROP CONSTRAINT IF EXISTS advisory_notified_account_id_fkey,
                DROP CONSTRAINT IF EXISTS advisory_notified_advisory_id_fkey;
            RETURN;
        EXCEPTION WHEN lock_not_available THEN
            PERFORM pg_sleep(0.2);
        END;
    END LOOP;
    RAISE NOTICE 'advisory_notified keeps its foreign keys: account, advisory or advisory_notified stayed in use for two minutes';
END $$;
