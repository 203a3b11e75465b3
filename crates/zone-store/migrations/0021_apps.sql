-- Apps a project runs on its nodes: each app, its revisions (the app file checked, with
-- every image resolved to a digest, kept as the JSON whose SHA-256 is the revision's digest,
-- never changed once written) with each deployment's state, and where each replica is
-- placed. Portable SQL (see 0001): flags are BIGINT 0/1.
CREATE TABLE apps (
    project_id TEXT NOT NULL REFERENCES projects (id),
    name TEXT NOT NULL,
    revision BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (project_id, name)
);

CREATE TABLE app_revisions (
    project_id TEXT NOT NULL,
    app TEXT NOT NULL,
    number BIGINT NOT NULL,
    digest TEXT NOT NULL CHECK (length(digest) = 71),
    document TEXT NOT NULL,
    origin TEXT NOT NULL,
    state TEXT NOT NULL,
    reason TEXT,
    created_by TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (project_id, app, number),
    FOREIGN KEY (project_id, app) REFERENCES apps (project_id, name)
);

CREATE TABLE app_replicas (
    project_id TEXT NOT NULL,
    app TEXT NOT NULL,
    workload TEXT NOT NULL,
    slot BIGINT NOT NULL,
    revision BIGINT NOT NULL,
    node_id TEXT,
    state TEXT NOT NULL,
    ready BIGINT NOT NULL,
    restarts BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (project_id, app, workload, slot),
    FOREIGN KEY (project_id, app) REFERENCES apps (project_id, name)
);
CREATE INDEX app_replicas_by_node ON app_replicas (node_id);
