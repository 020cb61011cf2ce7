-- The event log, its seals, and the bookkeeping of its consumers.
CREATE TABLE events (
    position       INTEGER PRIMARY KEY AUTOINCREMENT,
    -- SQLite has a single writer, so position order is commit order; txid is
    -- always 0 and exists only to give both back ends the same feed cursor.
    txid           BIGINT NOT NULL DEFAULT 0,
    event_id       TEXT   NOT NULL UNIQUE,
    aggregate_type TEXT   NOT NULL,
    aggregate_id   TEXT   NOT NULL,
    sequence       BIGINT NOT NULL CHECK (sequence >= 1),
    event_type     TEXT   NOT NULL,
    event_version  TEXT   NOT NULL,
    -- Canonical JSON text (RFC 8785), exactly the bytes that were hashed.
    payload        TEXT   NOT NULL,
    metadata       TEXT   NOT NULL,
    prev_hash      BLOB   NOT NULL,
    hash           BLOB   NOT NULL,
    CONSTRAINT events_stream_sequence UNIQUE (aggregate_type, aggregate_id, sequence)
);

CREATE TABLE snapshots (
    aggregate_type TEXT   NOT NULL,
    aggregate_id   TEXT   NOT NULL,
    last_sequence  BIGINT NOT NULL,
    snapshot_version BIGINT NOT NULL,
    payload        TEXT   NOT NULL,
    PRIMARY KEY (aggregate_type, aggregate_id)
);

-- One row per seal; `body` is the canonical JSON that was hashed and signed
-- (see event-schemas/CHAIN.md). `to_txid`/`to_position` repeat the body's end
-- cursor so the next seal can find where to start.
CREATE TABLE seals (
    seal_number BIGINT PRIMARY KEY,
    body        TEXT   NOT NULL,
    seal_hash   BLOB   NOT NULL,
    signature   BLOB   NOT NULL,
    to_txid     BIGINT NOT NULL,
    to_position BIGINT NOT NULL
);

CREATE TABLE checkpoints (
    consumer   TEXT   PRIMARY KEY,
    txid       BIGINT NOT NULL,
    position   BIGINT NOT NULL,
    updated_at TEXT   NOT NULL
);

CREATE TABLE projection_guards (
    projection     TEXT   NOT NULL,
    aggregate_type TEXT   NOT NULL,
    aggregate_id   TEXT   NOT NULL,
    last_sequence  BIGINT NOT NULL,
    PRIMARY KEY (projection, aggregate_type, aggregate_id)
);

CREATE TABLE projection_views (
    projection TEXT PRIMARY KEY,
    view       TEXT NOT NULL
);
