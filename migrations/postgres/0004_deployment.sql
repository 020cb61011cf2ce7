-- Facts about this deployment that outlive a process. `id` names its NATS
-- stream, subjects and consumers, so that deployments sharing a NATS server
-- never read each other's events; it is generated at the first start with
-- NATS (or taken from SERVICE_DEPLOYMENT_ID) and never changes afterwards.
CREATE TABLE deployment (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
