//! Passwords and the access edge's sessions.
//!
//! A user's password is kept as its Argon2id hash in PHC form, which the zone computes; the
//! store never sees a password. A session is found by the SHA-256 of its cookie's value. A
//! session holds while it has not ended, its lifetime has not run out, it has not sat idle
//! too long and, when it was made from an API token, that token is neither revoked nor
//! expired: the check is one query.

use orc_zone_model::{
    Name, SessionId, SessionPolicy, SessionSecret, SignedInWith, Timestamp, TokenId, User, UserId,
    WebSession,
};
use sqlx::any::AnyRow;

use super::error::{OperationExt, not_found};
use super::rows::{opt_parsed, opt_time, parsed, time};
use super::{Kind, Store, StoreResult};

const SESSION_COLUMNS: &str = "s.id, s.user_id, s.token_id, s.created_at, s.expires_at, \
     s.last_seen_at, s.ended_at";

fn session_from(row: &AnyRow) -> StoreResult<WebSession> {
    let token: Option<TokenId> = opt_parsed(row, "web_sessions.token_id")?;
    Ok(WebSession {
        id: parsed(row, "web_sessions.id")?,
        user_id: parsed(row, "web_sessions.user_id")?,
        signed_in_with: token.map_or(SignedInWith::Password, SignedInWith::Token),
        created_at: time(row, "web_sessions.created_at")?,
        expires_at: time(row, "web_sessions.expires_at")?,
        last_seen_at: time(row, "web_sessions.last_seen_at")?,
        ended_at: opt_time(row, "web_sessions.ended_at")?,
    })
}

fn millis(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl Store {
    /// Sets (or, with `None`, removes) the password hash of a user.
    pub async fn set_password_hash(&self, user: &UserId, hash: Option<&str>) -> StoreResult<()> {
        let done = sqlx::query("UPDATE users SET password_hash = $2 WHERE id = $1")
            .bind(user.as_str())
            .bind(hash)
            .execute(self.pool())
            .await
            .op("set a password")?;
        if done.rows_affected() == 0 {
            return Err(not_found(Kind::User, user));
        }
        Ok(())
    }

    /// The user named `name` with their password hash, if they have one; `None` when there
    /// is no such user.
    pub async fn user_with_password(
        &self,
        name: &Name,
    ) -> StoreResult<Option<(User, Option<String>)>> {
        let row =
            sqlx::query("SELECT id, name, created_at, password_hash FROM users WHERE name = $1")
                .bind(name.as_str())
                .fetch_optional(self.pool())
                .await
                .op("read a password")?;
        row.map(|row| {
            let user = User {
                id: parsed(&row, "users.id")?,
                name: parsed(&row, "users.name")?,
                created_at: time(&row, "users.created_at")?,
            };
            let hash = super::rows::opt_text(&row, "users.password_hash")?;
            Ok((user, hash))
        })
        .transpose()
    }

    /// Starts a session for `user` at `now`, lasting at most `policy.lifetime`; returns it
    /// with the cookie's value, which only the caller ever sees.
    pub async fn create_web_session(
        &self,
        user: &UserId,
        signed_in_with: &SignedInWith,
        policy: &SessionPolicy,
        now: Timestamp,
    ) -> StoreResult<(WebSession, SessionSecret)> {
        let id = SessionId::from_counter(self.allocate_ids(1).await?);
        let secret = SessionSecret::generate();
        let token = match signed_in_with {
            SignedInWith::Token(token) => Some(token.as_str()),
            SignedInWith::Password => None,
        };
        let expires_at = now.plus_millis(millis(policy.lifetime));
        sqlx::query(
            "INSERT INTO web_sessions (id, user_id, token_id, secret_sha256, created_at, \
             expires_at, last_seen_at, ended_at) VALUES ($1, $2, $3, $4, $5, $6, $5, NULL)",
        )
        .bind(id.as_str())
        .bind(user.as_str())
        .bind(token)
        .bind(secret.hash().to_hex())
        .bind(now.millis())
        .bind(expires_at.millis())
        .execute(self.pool())
        .await
        .op("start a session")?;
        let session = WebSession {
            id,
            user_id: user.clone(),
            signed_in_with: signed_in_with.clone(),
            created_at: now,
            expires_at,
            last_seen_at: now,
            ended_at: None,
        };
        Ok((session, secret))
    }

    /// The session whose cookie holds `secret`, if it holds at `now` under `policy` (and
    /// the token it was made from, if any, is live).
    pub async fn web_session(
        &self,
        secret: &SessionSecret,
        policy: &SessionPolicy,
        now: Timestamp,
    ) -> StoreResult<Option<WebSession>> {
        let sql = sqlx::AssertSqlSafe(format!(
            "SELECT {SESSION_COLUMNS} FROM web_sessions s \
             LEFT JOIN api_tokens t ON t.id = s.token_id \
             WHERE s.secret_sha256 = $1 AND s.ended_at IS NULL AND s.expires_at > $2 \
             AND s.last_seen_at > $3 \
             AND (s.token_id IS NULL OR (t.revoked_at IS NULL \
                  AND (t.expires_at IS NULL OR t.expires_at > $2)))"
        ));
        let row = sqlx::query(sql)
            .bind(secret.hash().to_hex())
            .bind(now.millis())
            .bind(now.millis().saturating_sub(millis(policy.idle)))
            .fetch_optional(self.pool())
            .await
            .op("read a session")?;
        row.as_ref().map(session_from).transpose()
    }

    /// Records a request of session `id` at `now`.
    pub async fn touch_web_session(&self, id: &SessionId, now: Timestamp) -> StoreResult<()> {
        sqlx::query(
            "UPDATE web_sessions SET last_seen_at = $2 WHERE id = $1 AND last_seen_at < $2",
        )
        .bind(id.as_str())
        .bind(now.millis())
        .execute(self.pool())
        .await
        .op("record a session's request")?;
        Ok(())
    }

    /// Ends session `id` (signing out); ending it again keeps the first time.
    pub async fn end_web_session(&self, id: &SessionId, now: Timestamp) -> StoreResult<()> {
        sqlx::query("UPDATE web_sessions SET ended_at = COALESCE(ended_at, $2) WHERE id = $1")
            .bind(id.as_str())
            .bind(now.millis())
            .execute(self.pool())
            .await
            .op("end a session")?;
        Ok(())
    }

    /// Ends every session of `user` (a password change); returns how many had not ended.
    pub async fn end_web_sessions_of(&self, user: &UserId, now: Timestamp) -> StoreResult<u64> {
        let done = sqlx::query(
            "UPDATE web_sessions SET ended_at = $2 WHERE user_id = $1 AND ended_at IS NULL",
        )
        .bind(user.as_str())
        .bind(now.millis())
        .execute(self.pool())
        .await
        .op("end a user's sessions")?;
        Ok(done.rows_affected())
    }

    /// Deletes sessions that ended or expired before `before`; returns how many.
    pub async fn delete_old_web_sessions(&self, before: Timestamp) -> StoreResult<u64> {
        let done = sqlx::query("DELETE FROM web_sessions WHERE expires_at < $1 OR ended_at < $1")
            .bind(before.millis())
            .execute(self.pool())
            .await
            .op("delete old sessions")?;
        Ok(done.rows_affected())
    }
}
