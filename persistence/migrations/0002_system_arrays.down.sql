-- Back to version 1: one row per system and package, and per system and advisory.
CREATE TABLE system_package (
    system_id  BIGINT NOT NULL REFERENCES system (id) ON DELETE CASCADE,
    package_id BIGINT NOT NULL REFERENCES package (id),
    PRIMARY KEY (system_id, package_id)
);

CREATE TABLE system_advisory (
    system_id      BIGINT NOT NULL REFERENCES system (id) ON DELETE CASCADE,
    advisory_id    INT NOT NULL REFERENCES advisory (id),
    status         TEXT NOT NULL CHECK (status IN ('installable', 'applicable')),
    first_reported TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (system_id, advisory_id)
);

INSERT INTO system_package (system_id, package_id)
SELECT s.id, p FROM system s, unnest(s.package_ids) AS p;

INSERT INTO system_advisory (system_id, advisory_id, status, first_reported)
SELECT s.id, a.id,
       CASE WHEN a.id = ANY (s.installable_advisory_ids) THEN 'installable' ELSE 'applicable' END,
       COALESCE(a.first_reported, now())
FROM system s, unnest(s.advisory_ids, s.advisory_first_reported) AS a (id, first_reported);

ALTER TABLE system RESET (fillfactor);
ALTER TABLE system
    DROP COLUMN package_ids, DROP COLUMN advisory_ids,
    DROP COLUMN installable_advisory_ids, DROP COLUMN advisory_first_reported;
