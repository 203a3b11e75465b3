-- Two things a replica's row says for rollouts and `orc app status`:
-- - `message`: why it failed or waits, in the words its node reports ("cannot fetch …");
--   NULL while there is nothing to say;
-- - `draining_at`: when a rollout took it out of its service's names to stop it; it keeps
--   running until requests that found it have finished, then goes. NULL while it serves.
-- Portable SQL (see 0001).
ALTER TABLE app_replicas ADD COLUMN message TEXT;
ALTER TABLE app_replicas ADD COLUMN draining_at BIGINT;
