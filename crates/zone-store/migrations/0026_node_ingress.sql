-- Which nodes accept public ingress: their agent's proxy serves the project's domains, its
-- plain-HTTP catch-all and its public TCP ports. A person's choice (`orc node ingress
-- enable|disable`) is kept with who made it (`set_by`); the zone's own choice has `set_by`
-- NULL: a node that joins while no live node of its project accepts ingress, and no person
-- ever chose for the project, accepts it. Rows of a node that ended stay, so a person's
-- choice is remembered after the node is gone. Portable SQL (see 0001).
CREATE TABLE node_ingress (
    node_id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    enabled BIGINT NOT NULL CHECK (enabled IN (0, 1)),
    set_by TEXT,
    set_at BIGINT NOT NULL
);
CREATE INDEX node_ingress_by_project ON node_ingress (project_id);
