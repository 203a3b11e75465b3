-- Each replica's address in its node's workload subnet, given when the zone first assigns it
-- to the node and kept for its life (the node's name server answers service names with the
-- addresses of ready replicas). Portable SQL (see 0001).
ALTER TABLE app_replicas ADD COLUMN address TEXT;
