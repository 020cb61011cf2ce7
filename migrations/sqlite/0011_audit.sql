-- The audit log's rows (issue 25): the `audit_log` table projection.
-- Columns other than the key may be null because later events upsert only
-- what they change (an INSERT lacking a NOT NULL column fails before its
-- ON CONFLICT); the first event of a row sets every one.

-- One row per event: who (`actor`), which request, when, which subject.
CREATE TABLE audit_entries (
    -- The event's log position (`position` is a keyword in PostgreSQL).
    event_position BIGINT NOT NULL PRIMARY KEY,
    txid         BIGINT,
    trail_id     TEXT,
    subject_type TEXT,
    subject_id   TEXT,
    sequence     BIGINT,
    event_type   TEXT,
    actor        TEXT,
    request_id   TEXT,
    recorded_at  TEXT
);
CREATE INDEX audit_entries_trail ON audit_entries (trail_id, event_position);
CREATE INDEX audit_entries_actor ON audit_entries (actor, event_position);
CREATE INDEX audit_entries_type ON audit_entries (event_type, event_position);
CREATE INDEX audit_entries_subject ON audit_entries (subject_type, event_position);
CREATE INDEX audit_entries_time ON audit_entries (recorded_at);

-- One row per subject (its trail): the user it belongs to and its extent.
CREATE TABLE audit_trails (
    trail_id       TEXT NOT NULL PRIMARY KEY,
    subject_type   TEXT,
    subject_id     TEXT,
    owner          TEXT,
    entries        BIGINT,
    first_position BIGINT,
    last_position  BIGINT,
    created_at     TEXT,
    updated_at     TEXT
);
CREATE INDEX audit_trails_owner ON audit_trails (owner, last_position);
CREATE INDEX audit_trails_recent ON audit_trails (last_position);
