-- patchflow schema, version 4: the outbox. The messages an event decides
-- (remediations, notifications, payload status) are written in the
-- transaction that writes the event's rows, and published from here by the
-- relay (actors/outbox_relay.go): a message exists if and only if its
-- transaction committed, and a crash between commit and publish loses
-- nothing, since the row waits here until the broker acknowledged it.
CREATE TABLE outbox (
    id           BIGSERIAL PRIMARY KEY,            -- publish order within an ordering key
    kind         TEXT NOT NULL CHECK (kind IN ('remediation', 'notification', 'payload_status')),
    -- messages of one ordering key (a host's inventory id; an org id for
    -- notifications) are published one relay at a time, in id order
    ordering_key TEXT NOT NULL,
    message_key  TEXT,                             -- the Kafka record's key; NULL: none
    -- stable across republishing: a duplicate after a crash carries the
    -- same id (the record's header patchflow-event-id; a notification's id)
    event_id     UUID NOT NULL DEFAULT gen_random_uuid(),
    payload      TEXT NOT NULL,                    -- the record's value, JSON
    created_at   TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    -- set when the broker refused the message for good (too large, say):
    -- kept for a person, left out of the relay's rounds, its key's later
    -- messages going on
    refused      TEXT
);
-- A remediation message is the host's state: one pending per host, the
-- newest replacing an unpublished older one (under a new id, so a relay
-- publishing the older one does not delete the newer).
CREATE UNIQUE INDEX outbox_remediation_per_host ON outbox (ordering_key) WHERE kind = 'remediation';
CREATE INDEX outbox_ordering_key ON outbox (ordering_key, id);

-- The checksum of the last remediation message written for a system: an
-- evaluation that leaves it unchanged writes none.
CREATE TABLE remediation_state (
    system_id BIGINT PRIMARY KEY REFERENCES system (id) ON DELETE CASCADE,
    checksum  BYTEA NOT NULL
);

-- Each (org, advisory) notified, written in the transaction of the
-- notification's outbox row: an org hears of an advisory once.
CREATE TABLE advisory_notified (
    account_id  INT NOT NULL REFERENCES account (id),
    advisory_id INT NOT NULL REFERENCES advisory (id),
    notified_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (account_id, advisory_id)
);
