-- Per-subject data keys for erasure by crypto-shredding (ARCHITECTURE.md,
-- "Erasure"). Personal fields in events are sealed under their subject's
-- key; the key is kept here wrapped by the field cipher (JSON text). This
-- table is not part of the hash chain: deleting a row erases the subject's
-- fields for good and leaves every event, hash and seal as it was.
CREATE TABLE subject_keys (
    subject     TEXT NOT NULL PRIMARY KEY,
    wrapped_key TEXT NOT NULL,
    created_at  TEXT NOT NULL
);
