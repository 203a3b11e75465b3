-- Images in the zone's registry (the OCI distribution API). A manifest's bytes are a blob on
-- disk named by its digest, like every layer; here are which org and repository hold it, its
-- media type, what it refers to (config and layers, or an index's manifests) and the tags
-- that point at it. An org holds the blobs its manifests refer to, and the sweep keeps
-- exactly the blobs some manifest, package or recent upload names. Portable SQL (see 0001).
CREATE TABLE image_manifests (
    org_id TEXT NOT NULL REFERENCES orgs (id),
    repository TEXT NOT NULL,
    digest TEXT NOT NULL CHECK (length(digest) = 71),
    media_type TEXT NOT NULL,
    size BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (org_id, repository, digest)
);

CREATE TABLE image_references (
    org_id TEXT NOT NULL,
    repository TEXT NOT NULL,
    digest TEXT NOT NULL,
    referenced TEXT NOT NULL CHECK (length(referenced) = 71),
    size BIGINT NOT NULL,
    PRIMARY KEY (org_id, repository, digest, referenced),
    FOREIGN KEY (org_id, repository, digest) REFERENCES image_manifests (org_id, repository, digest)
);
CREATE INDEX image_references_by_blob ON image_references (org_id, referenced);

CREATE TABLE image_tags (
    org_id TEXT NOT NULL,
    repository TEXT NOT NULL,
    tag TEXT NOT NULL,
    digest TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (org_id, repository, tag),
    FOREIGN KEY (org_id, repository, digest) REFERENCES image_manifests (org_id, repository, digest)
);
