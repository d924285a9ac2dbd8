-- patchflow schema, version 2: a system's packages and advisories live in
-- its own row, as sorted arrays of ids, instead of ~400 system_package and
-- ~300 system_advisory rows per system. Writing a new system is then one
-- row (its arrays TOASTed and compressed) and two GIN index insertions, not
-- 700 heap tuples, 700 primary-key entries and 700 foreign-key checks.
--
-- The arrays refer to package and advisory rows without foreign keys
-- (PostgreSQL has none for array elements). The listener only ever stores
-- ids it read from those tables, and rows of package, package_name and
-- advisory are never deleted, so every id resolves.

ALTER TABLE system
    ADD COLUMN package_ids              BIGINT[]      NOT NULL DEFAULT '{}', -- package.id, sorted, unique
    ADD COLUMN advisory_ids             INT[]         NOT NULL DEFAULT '{}', -- advisory.id affecting the system, sorted, unique
    ADD COLUMN installable_advisory_ids INT[]         NOT NULL DEFAULT '{}', -- the installable ones among them; the rest are applicable
    ADD COLUMN advisory_first_reported  TIMESTAMPTZ[] NOT NULL DEFAULT '{}'; -- when each of advisory_ids was first reported, in the same order

UPDATE system s SET
    package_ids = COALESCE((SELECT array_agg(sp.package_id ORDER BY sp.package_id)
                            FROM system_package sp WHERE sp.system_id = s.id), '{}'),
    advisory_ids = COALESCE((SELECT array_agg(sa.advisory_id ORDER BY sa.advisory_id)
                             FROM system_advisory sa WHERE sa.system_id = s.id), '{}'),
    installable_advisory_ids = COALESCE((SELECT array_agg(sa.advisory_id ORDER BY sa.advisory_id)
                                         FROM system_advisory sa WHERE sa.system_id = s.id AND sa.status = 'installable'), '{}'),
    advisory_first_reported = COALESCE((SELECT array_agg(sa.first_reported ORDER BY sa.advisory_id)
                                        FROM system_advisory sa WHERE sa.system_id = s.id), '{}');

DROP TABLE system_package, system_advisory;

-- Room on each page for a row's next version: an update that leaves the
-- indexed columns alone (an unchanged re-check-in) is then HOT, writing no
-- index entry, only while its page has space. Applies to pages written
-- from now on.
ALTER TABLE system SET (fillfactor = 70);

-- "Which systems have this package (or any build of this name)" and "which
-- systems does this advisory affect" are array containment queries.
CREATE INDEX system_package_ids ON system USING gin (package_ids);
CREATE INDEX system_advisory_ids ON system USING gin (advisory_ids);
