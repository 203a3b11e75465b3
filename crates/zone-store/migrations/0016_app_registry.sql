-- The app registry: packages (an app's manifest and the digest of one binary per platform,
-- kept as the JSON document whose SHA-256 is the package's digest) and the tags that point
-- at them. Binaries themselves live on disk under the data dir, named by their digest. A
-- pool on `core` records the digest its tag named when it was created or reconfigured.
-- Portable SQL (see 0001).
CREATE TABLE app_packages (
    org_id TEXT NOT NULL REFERENCES orgs (id),
    name TEXT NOT NULL,
    digest TEXT NOT NULL CHECK (length(digest) = 71),
    document TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (org_id, name, digest)
);

CREATE TABLE app_tags (
    org_id TEXT NOT NULL,
    name TEXT NOT NULL,
    tag TEXT NOT NULL,
    digest TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (org_id, name, tag),
    FOREIGN KEY (org_id, name, digest) REFERENCES app_packages (org_id, name, digest)
);
CREATE INDEX app_tags_by_digest ON app_tags (digest);

ALTER TABLE pools ADD COLUMN app_digest TEXT;
