-- Read models kept as one JSON document per key (an account, a session),
-- written only by their projection runner. `owner` lists a user's documents;
-- `lookup` finds a document by a second key (an API key id).
CREATE TABLE documents (
    projection TEXT NOT NULL,
    doc_key    TEXT NOT NULL,
    owner      TEXT,
    lookup     TEXT,
    doc        TEXT NOT NULL,
    PRIMARY KEY (projection, doc_key)
);
CREATE INDEX documents_owner ON documents (projection, owner);
CREATE INDEX documents_lookup ON documents (projection, lookup);

-- When each session was last used. Operational data like rate-limit buckets,
-- not part of the log: written at most once a minute per session by the
-- replica that served the request, read for the inactivity timeout.
CREATE TABLE session_activity (
    session_id    TEXT   PRIMARY KEY,
    last_activity BIGINT NOT NULL
);
