-- Tenancy: the id counter, orgs, projects, users, API tokens and memberships.
-- Portable SQL: runs unchanged on SQLite and PostgreSQL (TEXT, BIGINT, CHECK, UNIQUE,
-- REFERENCES, plain and expression indexes only).

-- The zone's single id counter. Every id is a prefix plus this counter in base32.
CREATE TABLE id_counter (
    singleton BIGINT PRIMARY KEY CHECK (singleton = 1),
    next_value BIGINT NOT NULL CHECK (next_value >= 1)
);
INSERT INTO id_counter (singleton, next_value) VALUES (1, 3);

CREATE TABLE orgs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    CONSTRAINT orgs_name_unique UNIQUE (name)
);

CREATE TABLE projects (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs (id),
    name TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    CONSTRAINT projects_name_unique UNIQUE (org_id, name),
    CONSTRAINT projects_id_org UNIQUE (id, org_id)
);

CREATE TABLE users (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    CONSTRAINT users_name_unique UNIQUE (name)
);

-- Only the SHA-256 of a token value is kept (64 lower-case hex digits).
CREATE TABLE api_tokens (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users (id),
    label TEXT NOT NULL,
    secret_sha256 TEXT NOT NULL CHECK (length(secret_sha256) = 64),
    created_at BIGINT NOT NULL,
    expires_at BIGINT,
    revoked_at BIGINT,
    CONSTRAINT api_tokens_secret_unique UNIQUE (secret_sha256)
);
CREATE INDEX api_tokens_by_user ON api_tokens (user_id, id);

-- A role in an org (project_id NULL) or in one project of that org.
CREATE TABLE memberships (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users (id),
    org_id TEXT NOT NULL REFERENCES orgs (id),
    project_id TEXT,
    role TEXT NOT NULL CHECK (role IN ('owner', 'member', 'viewer')),
    created_at BIGINT NOT NULL,
    FOREIGN KEY (project_id, org_id) REFERENCES projects (id, org_id)
);
-- NULLs are distinct in UNIQUE constraints on both engines, so key on COALESCE.
CREATE UNIQUE INDEX memberships_scope_unique
    ON memberships (user_id, org_id, COALESCE(project_id, ''));
CREATE INDEX memberships_by_org ON memberships (org_id, id);
