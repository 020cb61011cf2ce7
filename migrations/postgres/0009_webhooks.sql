-- Outgoing webhooks (spec §6.2).

-- `webhook_subscriptions` projection: one row per live subscription; the
-- signing secret is kept sealed by the field cipher (JSON text). Columns
-- other than the key may be null because the projection's later events
-- upsert only what they change (an INSERT that lacks a NOT NULL column
-- fails before its ON CONFLICT); the first event sets every one.
CREATE TABLE webhook_subscriptions (
    subscription_id TEXT NOT NULL PRIMARY KEY,
    owner           TEXT,
    url             TEXT,
    events          TEXT,
    description     TEXT,
    active          BIGINT,
    disabled_reason TEXT,
    secret          TEXT,
    created_at      TEXT,
    updated_at      TEXT
);
CREATE INDEX webhook_subscriptions_owner ON webhook_subscriptions (owner, created_at);

-- What the delivery consumer remembers of each debate it may send events
-- of: its owner and topic, and its verdict once there is one. Written in
-- the consumer's transaction with its checkpoint; a row goes when the
-- debate ends.
CREATE TABLE webhook_debates (
    debate_id TEXT NOT NULL PRIMARY KEY,
    owner     TEXT,
    topic     TEXT NOT NULL,
    verdict   TEXT
);

-- Delivery jobs: one per subscription and event, written by the consumer
-- with its checkpoint, sent by the delivery worker. `pending` until a
-- response is recorded (a worker holds a job by `lease_until`, in Unix
-- milliseconds, so a job whose worker died is taken again), then
-- `delivered` or `failed` (given up after the retry window).
-- `feed_txid`, `feed_position` keep the feed order per subscription.
CREATE TABLE webhook_deliveries (
    delivery_id      TEXT   NOT NULL PRIMARY KEY,
    subscription_id  TEXT   NOT NULL,
    message_id       TEXT   NOT NULL,
    event_type       TEXT   NOT NULL,
    body             TEXT   NOT NULL,
    feed_txid        BIGINT NOT NULL,
    feed_position    BIGINT NOT NULL,
    status           TEXT   NOT NULL,
    attempts         BIGINT NOT NULL,
    failures         BIGINT NOT NULL,
    next_attempt_at  BIGINT NOT NULL,
    lease_until      BIGINT NOT NULL,
    first_attempt_at BIGINT,
    last_attempt_at  BIGINT,
    response_code    BIGINT,
    last_error       TEXT,
    created_at       BIGINT NOT NULL
);
CREATE UNIQUE INDEX webhook_deliveries_message ON webhook_deliveries (subscription_id, message_id);
CREATE INDEX webhook_deliveries_order ON webhook_deliveries (subscription_id, status, feed_txid, feed_position);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, next_attempt_at);
CREATE INDEX webhook_deliveries_list ON webhook_deliveries (subscription_id, created_at);
