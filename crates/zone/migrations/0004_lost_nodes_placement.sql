-- Lost nodes and direct placement. Portable SQL (see 0001).

-- When a node was found missing from its provider's complete inventory; NULL otherwise.
-- Its billing stops there, and the zone replaces it a while later.
ALTER TABLE nodes ADD COLUMN lost_at BIGINT;

-- A pool placed directly on one cloud: provider-specific keys such as {"plan": "cx23"},
-- as a JSON object; '{}' for pools that leave the choice to their provider.
ALTER TABLE pools ADD COLUMN placement TEXT NOT NULL DEFAULT '{}';
