-- Which org sent which registry binary. A binary lives on disk once, named by its digest,
-- but an org sees and names only the binaries it holds: those its own packages name, and
-- those it sent that no package of it names yet (one row here each, forgotten when a
-- package of the org names the binary or after an hour). Another org that wants the same
-- content sends it itself. Portable SQL (see 0001).
CREATE TABLE app_blob_uploads (
    org_id TEXT NOT NULL REFERENCES orgs (id),
    digest TEXT NOT NULL CHECK (length(digest) = 71),
    size BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (org_id, digest)
);
