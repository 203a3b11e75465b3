-- Project secrets: the values a project's apps read by name (`secretEnv` and `secretFiles`
-- in orch.pkl). A value is sealed with the zone's sealing key, bound to its project id and
-- name, so the database, its files and its backups never hold it in clear, and a sealed
-- value copied to another project or name does not open. `version` starts at 1 and counts
-- every set of the name. `updated_by` is the id of the user who set it last; it is a record,
-- not a reference, so deleting that user leaves it as it was. A project's secrets go with
-- the project. Portable SQL (see 0001).
CREATE TABLE secrets (
    project_id TEXT NOT NULL REFERENCES projects (id),
    name TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 63),
    sealed_value TEXT NOT NULL CHECK (sealed_value LIKE 'sealed:v1:%'),
    version BIGINT NOT NULL CHECK (version >= 1),
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    updated_by TEXT NOT NULL,
    PRIMARY KEY (project_id, name)
);
