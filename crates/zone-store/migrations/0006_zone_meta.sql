-- Facts about the zone's store itself, by name. `sealing_key_id` names the key whose
-- sealed values the store holds (see `seal.rs`), so a controller started with another key
-- refuses to run instead of failing on the first deploy. Portable SQL (see 0001).
CREATE TABLE zone_meta (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
