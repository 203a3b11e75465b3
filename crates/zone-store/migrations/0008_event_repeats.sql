-- A node refused again with the same words is one event that counts its repeats and keeps
-- the time of the last, instead of a new row every retry. Portable SQL (see 0001).
ALTER TABLE events ADD COLUMN repeats BIGINT NOT NULL DEFAULT 1;
ALTER TABLE events ADD COLUMN last_at BIGINT;
