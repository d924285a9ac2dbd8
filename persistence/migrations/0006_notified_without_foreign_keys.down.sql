-- Puts back the keys migration 6 dropped (when it did).
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'advisory_notified_account_id_fkey' AND conrelid = 'advisory_notified'::regclass) THEN
        ALTER TABLE advisory_notified ADD CONSTRAINT advisory_notified_account_id_fkey FOREIGN KEY (account_id) REFERENCES account (id);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'advisory_notified_advisory_id_fkey' AND conrelid = 'advisory_notified'::regclass) THEN
        ALTER TABLE advisory_notified ADD CONSTRAINT advisory_notified_advisory_id_fkey FOREIGN KEY (advisory_id) REFERENCES advisory (id);
    END IF;
END $$;
