-- The event log, its seals, and the bookkeeping of its consumers.
CREATE TABLE events (
    position       BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- The writing transaction: the feed reads only transactions older than
    -- every one still in flight, so a late commit cannot be skipped.
    txid           BIGINT NOT NULL DEFAULT (pg_current_xact_id()::text::bigint),
    event_id       TEXT   NOT NULL UNIQUE,
    aggregate_type TEXT   NOT NULL,
    aggregate_id   TEXT   NOT NULL,
    sequence       BIGINT NOT NULL CHECK (sequence >= 1),
    event_type     TEXT   NOT NULL,
    event_version  TEXT   NOT NULL,
    -- Canonical JSON text (RFC 8785), exactly the bytes that were hashed.
    payload        TEXT   NOT NULL,
    metadata       TEXT   NOT NULL,
    prev_hash      BYTEA  NOT NULL,
    hash           BYTEA  NOT NULL,
    CONSTRAINT events_stream_sequence UNIQUE (aggregate_type, aggregate_id, sequence)
);
CREATE INDEX events_feed ON events (txid, position);

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
    seal_hash   BYTEA  NOT NULL,
    signature   BYTEA  NOT NULL,
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
