-- Providers, pools and nodes. Portable SQL (see 0001).
-- Decimals (markups, prices) are TEXT in canonical decimal notation, never REAL.
-- Times are BIGINT UTC milliseconds since the Unix epoch. Flags are BIGINT 0 or 1.

CREATE TABLE providers (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL REFERENCES projects (id),
    name TEXT NOT NULL,
    resource_uri TEXT NOT NULL,
    scope TEXT NOT NULL CHECK (scope IN ('project', 'zone')),
    -- NULL: no pricing strategy (unpriced nodes); otherwise the markup, 0 or more.
    markup TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    CONSTRAINT providers_name_unique UNIQUE (project_id, name),
    CONSTRAINT providers_resource_uri_unique UNIQUE (resource_uri)
);

CREATE TABLE pools (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL REFERENCES projects (id),
    name TEXT NOT NULL,
    provider_id TEXT NOT NULL REFERENCES providers (id),
    size BIGINT NOT NULL CHECK (size >= 0),
    vcpus BIGINT NOT NULL CHECK (vcpus > 0),
    memory_gib BIGINT NOT NULL CHECK (memory_gib > 0),
    arch TEXT NOT NULL CHECK (arch IN ('x86_64', 'arm64')),
    -- Extra disks in GiB, comma separated; '' when none.
    disks_gib TEXT NOT NULL,
    region_class TEXT NOT NULL,
    os TEXT NOT NULL,
    public BIGINT NOT NULL CHECK (public IN (0, 1)),
    -- JSON array of {name, protocol, port}.
    endpoints TEXT NOT NULL,
    -- App package `org/name:tag`, or NULL for a pool without an app.
    app TEXT,
    -- JSON objects of plain and of sensitive params.
    app_params TEXT NOT NULL,
    app_sensitive_params TEXT NOT NULL,
    generation BIGINT NOT NULL CHECK (generation >= 1),
    deleting BIGINT NOT NULL CHECK (deleting IN (0, 1)),
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    CONSTRAINT pools_name_unique UNIQUE (project_id, name)
);
CREATE INDEX pools_by_provider ON pools (provider_id, id);

CREATE TABLE nodes (
    id TEXT PRIMARY KEY,
    pool_id TEXT NOT NULL REFERENCES pools (id),
    slot BIGINT NOT NULL CHECK (slot >= 0),
    state TEXT NOT NULL CHECK (state IN ('pending', 'quoting', 'deploying', 'running',
        'destroying', 'ended', 'parked', 'lost')),
    state_words TEXT,
    refusal TEXT CHECK (refusal IN ('no_capacity', 'counting', 'transient', 'operator_fix',
        'failed')),
    site TEXT,
    instance_ref TEXT,
    -- JSON array of address strings.
    addresses TEXT NOT NULL,
    -- All three NULL: unpriced. Otherwise a decimal, an ISO 4217 code and a period.
    price_amount TEXT,
    price_currency TEXT,
    price_period TEXT CHECK (price_period IN ('hour', 'month', 'once')),
    -- Markup recorded at admission; NULL when the provider had no pricing strategy.
    markup TEXT,
    attempts BIGINT NOT NULL CHECK (attempts >= 0),
    next_attempt_at BIGINT,
    quote_token TEXT,
    version BIGINT NOT NULL CHECK (version >= 1),
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    ended_at BIGINT,
    CONSTRAINT nodes_price_whole CHECK (
        (price_amount IS NULL AND price_currency IS NULL AND price_period IS NULL)
        OR (price_amount IS NOT NULL AND price_currency IS NOT NULL
            AND price_period IS NOT NULL)),
    CONSTRAINT nodes_ended_at CHECK (
        (state = 'ended' AND ended_at IS NOT NULL)
        OR (state <> 'ended' AND ended_at IS NULL))
);
-- A live node owns its slot; ended nodes stay for history and free it.
CREATE UNIQUE INDEX nodes_live_slot_unique ON nodes (pool_id, slot) WHERE state <> 'ended';
CREATE INDEX nodes_by_pool ON nodes (pool_id, slot, id);
-- Reconcilers read due nodes in (next_attempt_at, id) order.
CREATE INDEX nodes_due ON nodes (next_attempt_at, id) WHERE next_attempt_at IS NOT NULL;
