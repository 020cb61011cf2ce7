-- Table projections: read models that own tables, written by their runner
-- in the same transaction as their checkpoint, and rebuilt from the log.

-- The version of each projection the stored read model was built by; a
-- projection whose registered version differs is rebuilt at start (a
-- missing row is version 1).
CREATE TABLE projection_versions (
    projection TEXT   PRIMARY KEY,
    version    BIGINT NOT NULL
);

-- What a table projection's fold keeps per key between batches (a debate
-- as folded so far), as JSON.
CREATE TABLE projection_states (
    projection TEXT NOT NULL,
    state_key  TEXT NOT NULL,
    state      TEXT NOT NULL,
    PRIMARY KEY (projection, state_key)
);

-- `debate_list`: one row per debate, the list item as served in `item`.
-- Each filter of GET /api/debates has an index in its order, newest first.
CREATE TABLE debate_list (
    debate_id TEXT NOT NULL PRIMARY KEY,
    owner     TEXT,
    status    TEXT NOT NULL,
    sort_key  TEXT NOT NULL,
    item      TEXT NOT NULL
);
CREATE INDEX debate_list_all ON debate_list (sort_key);
CREATE INDEX debate_list_owner ON debate_list (owner, sort_key);
CREATE INDEX debate_list_status ON debate_list (status, sort_key);
CREATE INDEX debate_list_owner_status ON debate_list (owner, status, sort_key);

-- Debates per owner and status; `*` counts every owner (or status), the
-- empty owner debates nobody created. A page's total is one row.
CREATE TABLE debate_list_counts (
    owner   TEXT   NOT NULL,
    status  TEXT   NOT NULL,
    debates BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (owner, status)
);

-- `admin_stats`: events per aggregate type, and the debates still active.
CREATE TABLE admin_event_counts (
    aggregate_type TEXT   NOT NULL PRIMARY KEY,
    events         BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE admin_active_debates (
    debate_id TEXT NOT NULL PRIMARY KEY
);

