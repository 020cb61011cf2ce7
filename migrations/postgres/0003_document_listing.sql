-- Listing documents: `state` is a filterable status (a debate's `running`),
-- `sort_key` orders a listing (a debate's creation time). Both are set by
-- the document's projection and null where it has none.
ALTER TABLE documents ADD COLUMN state TEXT;
ALTER TABLE documents ADD COLUMN sort_key TEXT;
CREATE INDEX documents_listing ON documents (projection, sort_key);
CREATE INDEX documents_owner_listing ON documents (projection, owner, sort_key);
CREATE INDEX documents_state_listing ON documents (projection, state, sort_key);

-- Which replica drives a running debate (PostgreSQL deployments with several
-- replicas). Operational like `session_activity`: not part of the log; a
-- claim lapses at `expires_at` unless its holder renews it.
CREATE TABLE debate_leases (
    debate_id  TEXT   PRIMARY KEY,
    holder     TEXT   NOT NULL,
    expires_at BIGINT NOT NULL
);
