-- patchflow schema, version 1.
--
-- Writes that touch several rows of a shared table (package_name, package,
-- advisory) always insert in sorted order, so concurrent evaluations take
-- their row locks in the same order and cannot deadlock.

CREATE TABLE account (
    id     SERIAL PRIMARY KEY,
    org_id TEXT NOT NULL UNIQUE
);

CREATE TABLE system (
    id                        BIGSERIAL PRIMARY KEY,
    account_id                INT NOT NULL REFERENCES account (id),
    inventory_id              UUID NOT NULL,
    display_name              TEXT NOT NULL DEFAULT '',
    reporter                  TEXT NOT NULL DEFAULT '',
    arch                      TEXT NOT NULL DEFAULT '',
    host_type                 TEXT NOT NULL DEFAULT '',
    os_name                   TEXT NOT NULL DEFAULT '',
    os_major                  INT,
    os_minor                  INT,
    releasever                TEXT NOT NULL DEFAULT '',
    rhsm_version              TEXT NOT NULL DEFAULT '',
    repos                     TEXT[] NOT NULL DEFAULT '{}',   -- enabled repository ids, sorted
    modules                   TEXT[] NOT NULL DEFAULT '{}',   -- "name:stream", sorted
    profile_checksum          TEXT NOT NULL,                  -- sha256 of the canonical profile
    stale_timestamp           TIMESTAMPTZ,
    culled_timestamp          TIMESTAMPTZ,
    last_upload               TIMESTAMPTZ NOT NULL,
    -- idempotency: the timestamp and request of the last event applied; an
    -- event not newer than this is ignored
    last_event_time           TIMESTAMPTZ NOT NULL,
    last_request_id           TEXT NOT NULL DEFAULT '',
    -- the event whose profile was last evaluated; behind last_event_time
    -- means an evaluation is still due
    last_evaluated_event_time TIMESTAMPTZ,
    last_evaluation           TIMESTAMPTZ,
    installable_advisories    INT NOT NULL DEFAULT 0,
    applicable_advisories     INT NOT NULL DEFAULT 0,
    security_advisories       INT NOT NULL DEFAULT 0,
    bugfix_advisories         INT NOT NULL DEFAULT 0,
    enhancement_advisories    INT NOT NULL DEFAULT 0,
    packages_installed        INT NOT NULL DEFAULT 0,
    packages_updatable        INT NOT NULL DEFAULT 0,
    UNIQUE (account_id, inventory_id)
);
CREATE INDEX system_inventory_id ON system (inventory_id);

CREATE TABLE package_name (
    id   SERIAL PRIMARY KEY,
    name TEXT NOT NULL UNIQUE
);

CREATE TABLE package (
    id      BIGSERIAL PRIMARY KEY,
    name_id INT NOT NULL REFERENCES package_name (id),
    evra    TEXT NOT NULL,                       -- "epoch:version-release.arch"
    UNIQUE (name_id, evra)
);

CREATE TABLE system_package (
    system_id  BIGINT NOT NULL REFERENCES system (id) ON DELETE CASCADE,
    package_id BIGINT NOT NULL REFERENCES package (id),
    PRIMARY KEY (system_id, package_id)
);

CREATE TABLE advisory (
    id            SERIAL PRIMARY KEY,
    name          TEXT NOT NULL UNIQUE,
    advisory_type TEXT NOT NULL DEFAULT 'unknown',  -- security, bugfix, enhancement, unknown
    severity      TEXT                              -- when known
);

CREATE TABLE system_advisory (
    system_id      BIGINT NOT NULL REFERENCES system (id) ON DELETE CASCADE,
    advisory_id    INT NOT NULL REFERENCES advisory (id),
    status         TEXT NOT NULL CHECK (status IN ('installable', 'applicable')),
    first_reported TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (system_id, advisory_id)
);

-- Hosts deleted recently: a late created/updated event for one of them is
-- ignored instead of resurrecting the host.
CREATE TABLE deleted_system (
    inventory_id UUID PRIMARY KEY,
    org_id       TEXT NOT NULL,
    event_time   TIMESTAMPTZ NOT NULL,
    deleted_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX deleted_system_deleted_at ON deleted_system (deleted_at);
