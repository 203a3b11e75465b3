-- Lost nodes, direct placement, public pools' addresses and providers' sites. Portable SQL
-- (see 0001).

-- When a node was found missing from its provider's complete inventory; NULL otherwise.
-- Its billing stops there, and the zone replaces it a while later.
ALTER TABLE nodes ADD COLUMN lost_at BIGINT;

-- A pool placed directly on one cloud: provider-specific keys such as {"plan": "cx23"},
-- as a JSON object; '{}' for pools that leave the choice to their provider.
ALTER TABLE pools ADD COLUMN placement TEXT NOT NULL DEFAULT '{}';

-- A public pool's address as its provider last reported it: one IPv4 at one site. The
-- zone pins the pool's quotes to that site.
CREATE TABLE pool_addresses (
    pool_id TEXT PRIMARY KEY REFERENCES pools (id),
    site TEXT NOT NULL,
    ipv4 TEXT NOT NULL,
    updated_at BIGINT NOT NULL
);

-- The sites a provider last reported open: its stable public IPv4 and private prefix.
CREATE TABLE provider_sites (
    provider_id TEXT NOT NULL REFERENCES providers (id),
    site TEXT NOT NULL,
    public_ipv4 TEXT,
    private_prefix TEXT,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (provider_id, site)
);
