-- Events a consumer gave up on (a permanent failure, or transient failures
-- past the retry bound), so that it could move on without losing them. An
-- admin lists them and asks for a retry (`retry_requested_at`); the
-- consumer's bus loop then hands the event to it again and deletes the row
-- when it succeeds. Projections never write here: they stop instead.
CREATE TABLE dead_letters (
    id                 TEXT   PRIMARY KEY,
    consumer           TEXT   NOT NULL,
    event_id           TEXT   NOT NULL,
    txid               BIGINT NOT NULL,
    position           BIGINT NOT NULL,
    reason             TEXT   NOT NULL,
    attempts           BIGINT NOT NULL,
    failed_at          TEXT   NOT NULL,
    retry_requested_at TEXT,
    UNIQUE (consumer, event_id)
);
