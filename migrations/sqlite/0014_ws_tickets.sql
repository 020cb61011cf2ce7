-- One-use WebSocket tickets (`POST /api/ws/ticket`), kept in the database
-- so that any replica redeems them: a browser behind a load balancer
-- without affinity may open its socket on another replica than the one
-- that issued its ticket. Only the ticket's SHA-256 is kept; a redeemed or
-- expired row goes.
CREATE TABLE ws_tickets (
    ticket_hash TEXT NOT NULL PRIMARY KEY,
    caller      TEXT NOT NULL,
    expires_at  BIGINT NOT NULL
);
CREATE INDEX ws_tickets_expiry ON ws_tickets (expires_at);
