-- A user's token may name the project its commands mean when they name none (the CLI's
-- default). Plain TEXT: deleting a project clears the tokens that named it.
ALTER TABLE api_tokens ADD COLUMN default_project_id TEXT;

-- The OpenSSH public keys a pool's nodes install, as a JSON array of lines.
ALTER TABLE pools ADD COLUMN ssh_keys TEXT NOT NULL DEFAULT '[]';

-- Where a provider put a node, as it reported at deploy: the cloud, its location and plan.
-- Only zone operators see them; tenants see the neutral site. Portable SQL (see 0001).
ALTER TABLE nodes ADD COLUMN placed_cloud TEXT;
ALTER TABLE nodes ADD COLUMN placed_location TEXT;
ALTER TABLE nodes ADD COLUMN placed_plan TEXT;
