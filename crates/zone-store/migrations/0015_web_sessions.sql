-- Sign-in at the access edge: users may have a password (its Argon2id hash in PHC form,
-- never the password), and a sign-in makes a session that a browser carries in a cookie.
-- The store keeps the SHA-256 of the cookie's value, never the value. A session made from
-- an API token names it and ends with it. Portable SQL (see 0001).
ALTER TABLE users ADD COLUMN password_hash TEXT;

CREATE TABLE web_sessions (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users (id),
    token_id TEXT REFERENCES api_tokens (id),
    secret_sha256 TEXT NOT NULL CHECK (length(secret_sha256) = 64),
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    last_seen_at BIGINT NOT NULL,
    ended_at BIGINT,
    CONSTRAINT web_sessions_secret_unique UNIQUE (secret_sha256)
);
CREATE INDEX web_sessions_by_user ON web_sessions (user_id, id);
