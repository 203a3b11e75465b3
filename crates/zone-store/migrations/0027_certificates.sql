-- Certificates the zone obtains by ACME for the domains apps route, and what it needs to
-- obtain them. Portable SQL (see 0001).
--
-- `certificates`: one row per domain an app of `project_id` routes while the project has an
-- ingress node. `chain_pem` (leaf first) and `sealed_key` (PKCS#8, sealed with the zone's
-- key, bound to the domain) are set once issued and kept through a failed renewal; `error`
-- is the last attempt's failure in words, cleared by a success. The zone tries again at
-- `next_attempt_at` (the renewal time once issued, a backoff after a failure). `wanted_at`
-- is the last time an app routed the domain: a row not wanted for a day is removed.
CREATE TABLE certificates (
    domain TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    chain_pem TEXT,
    sealed_key TEXT,
    not_after BIGINT,
    issued_at BIGINT,
    error TEXT,
    attempts BIGINT NOT NULL,
    next_attempt_at BIGINT NOT NULL,
    wanted_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX certificates_by_project ON certificates (project_id);

-- The zone's ACME account per directory URL: its credentials as the client keeps them
-- (JSON with the account's private key), sealed.
CREATE TABLE acme_accounts (
    directory TEXT PRIMARY KEY,
    sealed_credentials TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

-- HTTP-01 challenges being answered: every ingress node of the project serves
-- `/.well-known/acme-challenge/<token>` with the key authorization (public by design)
-- until `expires_at`.
CREATE TABLE acme_challenges (
    token TEXT PRIMARY KEY,
    domain TEXT NOT NULL,
    project_id TEXT NOT NULL,
    key_authorization TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX acme_challenges_by_project ON acme_challenges (project_id);
