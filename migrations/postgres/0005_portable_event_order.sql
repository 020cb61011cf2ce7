-- The feed order survives a move to another cluster (pg_dump/pg_restore, a
-- logical replica, a managed-service migration). `events.txid` was the
-- writing transaction's id, and a new cluster hands out ids from a small
-- number again: new events would sort before the restored ones. From now on
-- `txid` is the transaction id plus this database's `shift`, which is 0
-- until the database is found in another cluster whose ids lie below the
-- stored order; then it is raised once so that every later event sorts
-- after every stored one. Stored rows, seals and checkpoints keep their
-- values and stay valid. See event-schemas/CHAIN.md, section 1.
CREATE TABLE event_order (
    singleton         BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (singleton),
    -- Added to the transaction id of every event written from now on.
    shift             BIGINT NOT NULL,
    -- The cluster the shift was last settled in (pg_control_system());
    -- null where the server does not tell it.
    system_identifier BIGINT
);

-- This cluster's system identifier, or null where it may not be read
-- (some managed services restrict pg_control_system()).
CREATE FUNCTION agon_system_identifier() RETURNS BIGINT
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RETURN (SELECT system_identifier FROM pg_control_system());
EXCEPTION WHEN OTHERS THEN
    RETURN NULL;
END
$$;

INSERT INTO event_order (shift, system_identifier) VALUES (0, agon_system_identifier());

-- Settles the shift for this session and caches it in the session setting
-- `agon.event_order_shift`. Runs once per connection, from its first event
-- insert or feed read.
--
-- The database has moved when the cluster's system identifier differs from
-- the stored one, or when the highest stored order is at or above every id
-- this cluster has handed out plus the shift (impossible in the cluster
-- that wrote it: a visible event's transaction has committed). Only then is
-- the shift raised, just far enough for the oldest transaction still
-- running here to sort after every stored event. Within one cluster it
-- never changes, so a session's cached value never goes stale.
--
-- A session in the cluster the stored identifier names takes no lock. Any
-- other (a move, or a server that does not tell its identifier) settles
-- under an advisory lock held to the end of its transaction, so the
-- session that raises the shift does so first and the others then read the
-- raised value.
CREATE FUNCTION agon_settle_event_order() RETURNS BIGINT
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    here      BIGINT := agon_system_identifier();
    settled   event_order%ROWTYPE;
    highest   BIGINT;
    snapshot  pg_snapshot;
    new_shift BIGINT;
BEGIN
    SELECT * INTO STRICT settled FROM event_order;
    SELECT max(txid) INTO highest FROM events;
    snapshot := pg_current_snapshot();
    IF here = settled.system_identifier
       AND COALESCE(highest < pg_snapshot_xmax(snapshot)::text::bigint + settled.shift, TRUE) THEN
        PERFORM set_config('agon.event_order_shift', settled.shift::text, false);
        RETURN settled.shift;
    END IF;

    -- The lock takes no transaction id, so a raised shift covers this
    -- transaction too; each statement below sees what committed before it.
    PERFORM pg_advisory_xact_lock(hashtextextended('agon.event_order', 0));
    SELECT * INTO STRICT settled FROM event_order;
    SELECT max(txid) INTO highest FROM events;
    snapshot := pg_current_snapshot();
    new_shift := settled.shift;
    IF (here <> settled.system_identifier
        OR highest >= pg_snapshot_xmax(snapshot)::text::bigint + settled.shift)
       AND highest >= pg_snapshot_xmin(snapshot)::text::bigint + settled.shift THEN
        new_shift := highest + 1 - pg_snapshot_xmin(snapshot)::text::bigint;
        RAISE WARNING 'agon: the event log is in another cluster than the one that wrote it; events written from now on sort after position % (order shift % -> %)',
            (SELECT max(position) FROM events), settled.shift, new_shift;
    END IF;
    IF new_shift <> settled.shift OR here <> settled.system_identifier
       OR (here IS NOT NULL AND settled.system_identifier IS NULL) THEN
        UPDATE event_order
           SET shift = new_shift, system_identifier = COALESCE(here, system_identifier);
    END IF;
    PERFORM set_config('agon.event_order_shift', new_shift::text, false);
    RETURN new_shift;
END
$$;

-- The session's shift, settled on first use. Plain SQL without a FROM, so
-- the planner inlines it: the cost per event row is a settings lookup.
CREATE FUNCTION agon_event_order_shift() RETURNS BIGINT
LANGUAGE sql VOLATILE AS $$
    SELECT COALESCE(NULLIF(current_setting('agon.event_order_shift', true), ''),
                    agon_settle_event_order()::text)::bigint
$$;

-- The shift comes first (arguments are evaluated left to right), so a
-- session settles before its first event transaction takes its id, and
-- that id is at least the oldest one the settling saw running.
ALTER TABLE events ALTER COLUMN txid
    SET DEFAULT (agon_event_order_shift() + pg_current_xact_id()::text::bigint);
