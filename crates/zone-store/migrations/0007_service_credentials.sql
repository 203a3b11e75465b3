-- Service credentials and who may serve a provider. Portable SQL (see 0001).
--
-- A token with `service_pool_id` is the credential of one app pool's slots: it opens only
-- that pool's provider stream, in the pool's project, and nothing on the HTTP API.
ALTER TABLE api_tokens ADD COLUMN service_pool_id TEXT;
CREATE INDEX api_tokens_by_service_pool ON api_tokens (service_pool_id);

-- The principal whose credentials may attach replicas of a provider's resource:
-- `pool:<pool id>` for an app pool's slots, `user:<user id>` for a user's token. Set by the
-- first stream that registers (or, for rows older than this column, next attaches) it.
ALTER TABLE providers ADD COLUMN served_by TEXT;
