-- Rolling updates. A revision remembers when its rollout began (the deadline counts from
-- there; a blocked revision has not begun) and when it first became healthy (what an
-- automatic rollback returns to). A cordon may also drain: the replicas on the node move,
-- within their app's rollout budget. Portable SQL (see 0001): flags are BIGINT 0/1.
ALTER TABLE app_revisions ADD COLUMN started_at BIGINT;
ALTER TABLE app_revisions ADD COLUMN healthy_at BIGINT;
ALTER TABLE node_cordons ADD COLUMN draining BIGINT NOT NULL DEFAULT 0;
