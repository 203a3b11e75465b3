-- What placement knows of a node beyond its pool: the labels an operator or tenant gave it
-- (the `orc.` prefix is the zone's and never stored here) and whether it is cordoned (it
-- runs what it runs and takes nothing new). Portable SQL (see 0001).
CREATE TABLE node_labels (
    node_id TEXT NOT NULL,
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (node_id, name)
);

CREATE TABLE node_cordons (
    node_id TEXT PRIMARY KEY,
    cordoned_by TEXT,
    cordoned_at BIGINT NOT NULL
);
