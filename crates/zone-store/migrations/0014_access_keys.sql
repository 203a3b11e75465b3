-- The access edge's signing keys. The private key (PKCS#8, base64url) is sealed with the
-- zone's sealing key, bound to its kid. The current key has no retire_at; a key a rotation
-- replaced is published until retire_at, then deleted. Portable SQL (see 0001).
CREATE TABLE access_keys (
    kid TEXT PRIMARY KEY,
    private_key TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    retire_at BIGINT
);
