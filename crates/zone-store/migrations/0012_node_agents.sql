-- Node agents: one row per node whose agent joined, with its certificate (and the one it
-- had before its last renewal), the facts it last reported and the config generations the
-- zone wants and the agent applied. Facts are JSON text. Portable SQL (see 0001).
CREATE TABLE node_agents (
    node_id TEXT PRIMARY KEY REFERENCES nodes (id),
    state TEXT NOT NULL CHECK (state IN ('joined', 'ready')),
    joined_at BIGINT NOT NULL,
    product_uuid TEXT NOT NULL,
    cert_fingerprint TEXT NOT NULL UNIQUE,
    previous_fingerprint TEXT,
    cert_not_after BIGINT NOT NULL,
    agent_version TEXT NOT NULL,
    facts TEXT NOT NULL,
    desired_generation BIGINT NOT NULL,
    config_digest TEXT NOT NULL,
    applied_generation BIGINT NOT NULL,
    apply_error TEXT,
    last_contact_at BIGINT NOT NULL
);
CREATE INDEX node_agents_by_previous ON node_agents (previous_fingerprint);
