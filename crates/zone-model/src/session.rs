//! Sessions of the access edge: a person who signed in once (with an API token or a
//! password) gets a session, carried by a cookie, until they sign out, it sits idle too
//! long, or its lifetime ends. The store keeps the SHA-256 of the cookie's value, never the
//! value, like it does for API tokens.
//!
//! A session made from an API token lives no longer than that token: revoking or expiring
//! the token ends it.

use std::fmt;
use std::time::Duration;

use zeroize::Zeroizing;

use crate::model::{Timestamp, TokenHash, TokenId, TokenSecret, UserId};

orc_common::string_id!(
    /// Identifies a session of the access edge (`s-…`); not its secret.
    SessionId,
    "session",
    prefix "s-"
);

/// The value of a session cookie. `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionSecret(TokenSecret);

impl SessionSecret {
    /// A fresh random value (256 bits).
    pub fn generate() -> Self {
        SessionSecret(TokenSecret::generate())
    }

    /// Wraps a value a browser presented (for lookup).
    pub fn from_presented(value: String) -> Self {
        SessionSecret(TokenSecret::from_presented(value))
    }

    /// The value, to put in the cookie.
    pub fn expose(&self) -> &str {
        self.0.expose()
    }

    /// The hash the store keeps.
    pub fn hash(&self) -> TokenHash {
        self.0.hash()
    }
}

impl fmt::Debug for SessionSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SessionSecret(<redacted>)")
    }
}

/// How a person proved who they are when the session began.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignedInWith {
    /// An API token of theirs; the session ends when the token does.
    Token(TokenId),
    /// Their password.
    Password,
}

/// A session as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebSession {
    pub id: SessionId,
    pub user_id: UserId,
    pub signed_in_with: SignedInWith,
    pub created_at: Timestamp,
    /// Ends at this time whatever happens.
    pub expires_at: Timestamp,
    /// The last request seen (written at most once a minute).
    pub last_seen_at: Timestamp,
    pub ended_at: Option<Timestamp>,
}

/// How long sessions last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionPolicy {
    /// From sign-in to the end, however busy. Default 12 hours.
    pub lifetime: Duration,
    /// A session with no request for this long ends. Default 2 hours.
    pub idle: Duration,
}

impl Default for SessionPolicy {
    fn default() -> Self {
        SessionPolicy {
            lifetime: Duration::from_secs(12 * 3600),
            idle: Duration::from_secs(2 * 3600),
        }
    }
}

impl WebSession {
    /// Whether the session still holds at `now` under `policy` (the token it came from is
    /// checked by the store).
    pub fn holds_at(&self, now: Timestamp, policy: &SessionPolicy) -> bool {
        let idle_ms = i64::try_from(policy.idle.as_millis()).unwrap_or(i64::MAX);
        self.ended_at.is_none()
            && now < self.expires_at
            && now.millis() < self.last_seen_at.millis().saturating_add(idle_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(created: i64, last_seen: i64) -> WebSession {
        WebSession {
            id: SessionId::from_counter(9),
            user_id: UserId::from_counter(3),
            signed_in_with: SignedInWith::Password,
            created_at: Timestamp::from_unix_millis(created),
            expires_at: Timestamp::from_unix_millis(created + 10_000),
            last_seen_at: Timestamp::from_unix_millis(last_seen),
            ended_at: None,
        }
    }

    #[test]
    fn a_session_ends_at_its_lifetime_when_idle_or_when_ended() {
        let policy = SessionPolicy {
            lifetime: Duration::from_secs(10),
            idle: Duration::from_secs(4),
        };
        let s = session(0, 0);
        assert!(s.holds_at(Timestamp::from_unix_millis(3_999), &policy));
        assert!(
            !s.holds_at(Timestamp::from_unix_millis(4_000), &policy),
            "idle"
        );
        let busy = session(0, 9_000);
        assert!(busy.holds_at(Timestamp::from_unix_millis(9_999), &policy));
        assert!(
            !busy.holds_at(Timestamp::from_unix_millis(10_000), &policy),
            "lifetime"
        );
        let ended = WebSession {
            ended_at: Some(Timestamp::from_unix_millis(1)),
            ..session(0, 0)
        };
        assert!(!ended.holds_at(Timestamp::from_unix_millis(2), &policy));
        assert_eq!(
            format!("{:?}", SessionSecret::generate()),
            "SessionSecret(<redacted>)"
        );
    }
}

/// One of the access edge's signing keys, as the store keeps it (opened).
#[derive(Clone)]
pub struct StoredAccessKey {
    pub kid: String,
    /// PKCS#8 DER, opened.
    pub pkcs8: Zeroizing<Vec<u8>>,
    pub created_at: Timestamp,
    /// `None`: the current key; else published until then.
    pub retire_at: Option<Timestamp>,
}

impl fmt::Debug for StoredAccessKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoredAccessKey")
            .field("kid", &self.kid)
            .field("created_at", &self.created_at)
            .field("retire_at", &self.retire_at)
            .finish_non_exhaustive()
    }
}
