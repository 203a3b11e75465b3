-- Join tokens: each admits one node, once, until it expires, and pins the zone's CA. The
-- store keeps the SHA-256 of the token's text, never the text. Portable SQL (see 0001).
CREATE TABLE join_tokens (
    id TEXT PRIMARY KEY,
    node_id TEXT NOT NULL REFERENCES nodes (id),
    secret_sha256 TEXT NOT NULL UNIQUE,
    ca_fingerprint TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at BIGINT,
    revoked_at BIGINT,
    product_uuid TEXT
);
CREATE INDEX join_tokens_by_node ON join_tokens (node_id, id);
