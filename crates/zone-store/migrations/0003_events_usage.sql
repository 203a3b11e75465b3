-- Events and usage (invoice) lines. Portable SQL (see 0001).
-- Both keep ids as plain TEXT without foreign keys: history outlives the objects it names.

CREATE TABLE events (
    id TEXT PRIMARY KEY,
    at BIGINT NOT NULL,
    org_id TEXT,
    project_id TEXT,
    provider_id TEXT,
    pool_id TEXT,
    node_id TEXT,
    kind TEXT NOT NULL,
    words TEXT NOT NULL
);
CREATE INDEX events_by_project ON events (project_id, id);
CREATE INDEX events_by_pool ON events (pool_id, id);
CREATE INDEX events_by_node ON events (node_id, id);

CREATE TABLE usage_lines (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    month TEXT NOT NULL CHECK (length(month) = 7),
    pool_id TEXT,
    node_id TEXT,
    description TEXT NOT NULL,
    hours TEXT NOT NULL,
    rate_amount TEXT NOT NULL,
    rate_currency TEXT NOT NULL,
    rate_period TEXT NOT NULL CHECK (rate_period IN ('hour', 'month', 'once')),
    amount TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE UNIQUE INDEX usage_lines_key ON usage_lines (
    project_id, month, COALESCE(pool_id, ''), COALESCE(node_id, ''), description);
