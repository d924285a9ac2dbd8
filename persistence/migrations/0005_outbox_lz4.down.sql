DO $$
BEGIN
    IF current_setting('server_version_num')::int >= 140000 THEN
        EXECUTE 'ALTER TABLE outbox ALTER COLUMN payload SET COMPRESSION default';
    END IF;
END $$;
