-- Back to schema 5. A relay of schema 5 cannot render rows by reference:
-- those a writer of schema 5 replaced with a whole message become
-- remediation rows again; the others are deleted, with their hosts'
-- remediation checksums, so that each host's next evaluation writes its
-- message again.
UPDATE outbox SET kind = 'remediation' WHERE kind = 'remediation_ids' AND payload LIKE '{%';
DELETE FROM remediation_state r USING system s, outbox o
    WHERE r.system_id = s.id AND o.ordering_key = s.inventory_id::text AND o.kind = 'remediation_ids';
DELETE FROM outbox WHERE kind = 'remediation_ids';
CREATE UNIQUE INDEX outbox_remediation_per_host ON outbox (ordering_key) WHERE kind = 'remediation';
DROP INDEX outbox_remediation_of_host;
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check, ADD CONSTRAINT outbox_kind_check
    CHECK (kind IN ('remediation', 'notification', 'payload_status'));
