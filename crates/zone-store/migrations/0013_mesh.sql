-- The mesh: each project's prefix of the zone's mesh range, each member's address in it
-- (nodes and workstations), and released prefixes and addresses in quarantine until they
-- may be handed out again. Addresses and prefixes are text ("10.88.3.7", "10.88.3.0/24").
-- Portable SQL (see 0001).
CREATE TABLE mesh_prefixes (
    project_id TEXT PRIMARY KEY REFERENCES projects (id),
    prefix TEXT NOT NULL UNIQUE,
    allocated_at BIGINT NOT NULL
);
CREATE TABLE mesh_members (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('node', 'workstation')),
    project_id TEXT NOT NULL REFERENCES projects (id),
    name TEXT NOT NULL,
    address TEXT NOT NULL UNIQUE,
    public_key TEXT,
    created_at BIGINT NOT NULL
);
CREATE INDEX mesh_members_by_project ON mesh_members (project_id);
CREATE TABLE mesh_quarantine (
    value TEXT PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('prefix', 'address')),
    until_at BIGINT NOT NULL
);
