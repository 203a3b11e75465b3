//! Join tokens: how a new machine proves it is the node the zone made.
//!
//! A join token admits **one named node, once, until it expires**, and carries the
//! fingerprint of the zone's CA, so the agent that holds it trusts only its own zone. Its
//! text is `orcjoin1.<64 hex digits of the CA's SHA-256>.<52 base32 digits>`: the agent reads
//! the pin from it, and the zone keeps only the SHA-256 of the whole text.
//!
//! Invariants: `Debug` and `Display` of a secret never show it; [`JoinToken::check`] is the
//! one place that decides whether a presented token admits a node, and it names the reason
//! when it does not (used, revoked, expired, another node, another machine).

use std::fmt;
use std::time::Duration;

use crate::model::{JoinTokenId, NodeId, Timestamp, TokenHash, TokenSecret};

/// The text every join token starts with.
pub const JOIN_TOKEN_PREFIX: &str = "orcjoin1.";

/// How long a join token lives unless asked otherwise: one hour.
pub const DEFAULT_JOIN_TTL: Duration = Duration::from_secs(3600);
/// The shortest life a join token may be given: one minute.
pub const MIN_JOIN_TTL: Duration = Duration::from_secs(60);
/// The longest life a join token may be given: 24 hours.
pub const MAX_JOIN_TTL: Duration = Duration::from_secs(24 * 3600);

/// A join token's life, within [`MIN_JOIN_TTL`]..=[`MAX_JOIN_TTL`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JoinTtl(Duration);

impl JoinTtl {
    /// `ttl` when it is within bounds.
    pub fn new(ttl: Duration) -> Result<JoinTtl, JoinTokenError> {
        if (MIN_JOIN_TTL..=MAX_JOIN_TTL).contains(&ttl) {
            Ok(JoinTtl(ttl))
        } else {
            Err(JoinTokenError::Ttl(ttl.as_secs()))
        }
    }

    /// The life as a duration.
    pub fn get(self) -> Duration {
        self.0
    }
}

impl Default for JoinTtl {
    fn default() -> Self {
        JoinTtl(DEFAULT_JOIN_TTL)
    }
}

/// A join token's text could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JoinTokenError {
    /// The text is not a join token.
    #[error(
        "this is not a join token: it must read orcjoin1.<CA fingerprint>.<secret> \
         (`orc node join create` prints one)"
    )]
    Malformed,
    /// A life outside the bounds.
    #[error("a join token lives 1 min to 24 h; {0} s is outside that")]
    Ttl(u64),
}

/// The secret text of a join token. Shown once, when it is made; travels in user data or
/// over SSH stdin only.
#[derive(Clone, PartialEq, Eq)]
pub struct JoinTokenSecret {
    text: String,
}

impl JoinTokenSecret {
    /// A fresh token pinning the CA whose fingerprint is `ca_fingerprint` (`sha256:<hex>`).
    pub fn generate(ca_fingerprint: &str) -> JoinTokenSecret {
        let hex = ca_fingerprint
            .strip_prefix("sha256:")
            .unwrap_or(ca_fingerprint);
        let random = TokenSecret::generate();
        let digits = random
            .expose()
            .strip_prefix(TokenSecret::PREFIX)
            .unwrap_or(random.expose());
        JoinTokenSecret {
            text: format!("{JOIN_TOKEN_PREFIX}{}.{digits}", hex.to_ascii_lowercase()),
        }
    }

    /// Reads a presented token (surrounding whitespace ignored).
    pub fn parse(text: &str) -> Result<JoinTokenSecret, JoinTokenError> {
        let text = text.trim();
        let rest = text
            .strip_prefix(JOIN_TOKEN_PREFIX)
            .ok_or(JoinTokenError::Malformed)?;
        let (pin, secret) = rest.split_once('.').ok_or(JoinTokenError::Malformed)?;
        let pin_ok = pin.len() == 64 && pin.bytes().all(|b| b.is_ascii_hexdigit());
        let secret_ok = secret.len() >= 32 && secret.bytes().all(|b| b.is_ascii_alphanumeric());
        if !pin_ok || !secret_ok {
            return Err(JoinTokenError::Malformed);
        }
        Ok(JoinTokenSecret {
            text: text.to_ascii_lowercase(),
        })
    }

    /// The fingerprint of the CA the token pins, `sha256:<hex>`.
    pub fn ca_fingerprint(&self) -> String {
        let rest = &self.text[JOIN_TOKEN_PREFIX.len()..];
        let pin = rest.split('.').next().unwrap_or_default();
        format!("sha256:{pin}")
    }

    /// The whole text, to write into a bootstrap or send over SSH stdin.
    pub fn expose(&self) -> &str {
        &self.text
    }

    /// What the store keeps.
    pub fn hash(&self) -> TokenHash {
        TokenSecret::from_presented(self.text.clone()).hash()
    }
}

impl fmt::Debug for JoinTokenSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "JoinTokenSecret(pin {}, <redacted>)",
            self.ca_fingerprint()
        )
    }
}

/// A join token as the store keeps it (never its secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinToken {
    pub id: JoinTokenId,
    /// The one node it admits.
    pub node_id: NodeId,
    pub hash: TokenHash,
    /// The fingerprint of the CA it pins.
    pub ca_fingerprint: String,
    /// Who made it: `zone` (at deploy) or `user:<id>`.
    pub created_by: String,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
    pub used_at: Option<Timestamp>,
    pub revoked_at: Option<Timestamp>,
    /// When set, only the machine with this `product_uuid` may join with it (a Robot server
    /// identified before its install).
    pub product_uuid: Option<String>,
}

/// Why a presented join token admits nothing. The words go to the agent and into the
/// zone's events; they never show the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JoinRefusal {
    #[error("the join token is unknown to this zone (mistyped, or from another zone)")]
    Unknown,
    #[error("the join token pins CA {pinned}, and this zone's CA is {ours}")]
    WrongCa { pinned: String, ours: String },
    #[error("the join token was already used (a token admits one node, once)")]
    Used,
    #[error("the join token was revoked")]
    Revoked,
    #[error("the join token expired at {0}; mint a new one with `orc node join create`")]
    Expired(Timestamp),
    #[error("the join token admits node {admits}, not {asked}")]
    WrongNode { admits: NodeId, asked: NodeId },
    #[error(
        "the join token is bound to another machine (product_uuid {bound}, this one is {seen:?})"
    )]
    WrongMachine { bound: String, seen: String },
    #[error("node {0} has ended; it cannot join")]
    NodeEnded(NodeId),
}

impl JoinRefusal {
    /// A short machine-readable reason, for events and metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            JoinRefusal::Unknown => "unknown",
            JoinRefusal::WrongCa { .. } => "wrong_ca",
            JoinRefusal::Used => "used",
            JoinRefusal::Revoked => "revoked",
            JoinRefusal::Expired(_) => "expired",
            JoinRefusal::WrongNode { .. } => "wrong_node",
            JoinRefusal::WrongMachine { .. } => "wrong_machine",
            JoinRefusal::NodeEnded(_) => "node_ended",
        }
    }
}

impl JoinToken {
    /// Whether this token admits `node` on the machine with `product_uuid` at `now`.
    pub fn check(
        &self,
        node: &NodeId,
        product_uuid: &str,
        now: Timestamp,
    ) -> Result<(), JoinRefusal> {
        if self.revoked_at.is_some() {
            return Err(JoinRefusal::Revoked);
        }
        if self.used_at.is_some() {
            return Err(JoinRefusal::Used);
        }
        if now >= self.expires_at {
            return Err(JoinRefusal::Expired(self.expires_at));
        }
        if &self.node_id != node {
            return Err(JoinRefusal::WrongNode {
                admits: self.node_id.clone(),
                asked: node.clone(),
            });
        }
        if let Some(bound) = &self.product_uuid
            && !bound.eq_ignore_ascii_case(product_uuid)
        {
            return Err(JoinRefusal::WrongMachine {
                bound: bound.clone(),
                seen: product_uuid.to_string(),
            });
        }
        Ok(())
    }

    /// Whether the token could still admit its node at `now`.
    pub fn is_live(&self, now: Timestamp) -> bool {
        self.used_at.is_none() && self.revoked_at.is_none() && now < self.expires_at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CA: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn token(now: Timestamp) -> JoinToken {
        let secret = JoinTokenSecret::generate(CA);
        JoinToken {
            id: JoinTokenId::from_counter(1),
            node_id: NodeId::new("n-1").unwrap(),
            hash: secret.hash(),
            ca_fingerprint: CA.to_string(),
            created_by: "zone".to_string(),
            created_at: now,
            expires_at: now.plus(DEFAULT_JOIN_TTL),
            used_at: None,
            revoked_at: None,
            product_uuid: None,
        }
    }

    #[test]
    fn a_token_carries_its_pin_and_reads_back_as_itself() {
        let secret = JoinTokenSecret::generate(CA);
        assert!(secret.expose().starts_with("orcjoin1.0123456789abcdef"));
        assert_eq!(secret.ca_fingerprint(), CA);
        let back = JoinTokenSecret::parse(&format!("  {}\n", secret.expose())).unwrap();
        assert_eq!(back, secret);
        assert_eq!(back.hash(), secret.hash());
        assert_ne!(JoinTokenSecret::generate(CA), secret, "each token is fresh");
        let debug = format!("{secret:?}");
        let digits = secret.expose().rsplit('.').next().unwrap();
        assert!(!debug.contains(digits), "{debug}");
    }

    #[test]
    fn other_text_is_not_a_token() {
        for text in [
            "",
            "orc_abc",
            "orcjoin1.",
            "orcjoin1.xyz.0123456789abcdefghjkmnpqrstvwxyz0123",
            &format!("orcjoin1.{}.short", &CA[7..]),
            &format!("orcjoin1.{}", &CA[7..]),
        ] {
            assert_eq!(
                JoinTokenSecret::parse(text),
                Err(JoinTokenError::Malformed),
                "{text:?}"
            );
        }
    }

    #[test]
    fn ttls_are_bounded_to_a_minute_and_a_day() {
        assert!(JoinTtl::new(Duration::from_secs(59)).is_err());
        assert!(JoinTtl::new(Duration::from_secs(60)).is_ok());
        assert!(JoinTtl::new(MAX_JOIN_TTL).is_ok());
        assert_eq!(
            JoinTtl::new(MAX_JOIN_TTL + Duration::from_secs(1)),
            Err(JoinTokenError::Ttl(86401))
        );
        assert_eq!(JoinTtl::default().get(), Duration::from_secs(3600));
    }

    #[test]
    fn a_token_admits_its_node_once_before_it_expires() {
        let now = Timestamp::from_unix_secs(1_000_000);
        let node = NodeId::new("n-1").unwrap();
        let t = token(now);
        assert_eq!(t.check(&node, "", now), Ok(()));
        assert!(t.is_live(now));

        let other = NodeId::new("n-2").unwrap();
        assert!(matches!(
            t.check(&other, "", now),
            Err(JoinRefusal::WrongNode { .. })
        ));

        let late = now.plus(DEFAULT_JOIN_TTL);
        assert_eq!(t.check(&node, "", late), Err(JoinRefusal::Expired(late)));
        assert!(!t.is_live(late));

        let used = JoinToken {
            used_at: Some(now),
            ..t.clone()
        };
        assert_eq!(used.check(&node, "", now), Err(JoinRefusal::Used));
        let revoked = JoinToken {
            revoked_at: Some(now),
            used_at: Some(now),
            ..t.clone()
        };
        assert_eq!(revoked.check(&node, "", now), Err(JoinRefusal::Revoked));
        assert_eq!(
            revoked.check(&node, "", now).unwrap_err().reason(),
            "revoked"
        );
    }

    #[test]
    fn a_bound_token_admits_only_its_machine() {
        let now = Timestamp::from_unix_secs(1_000_000);
        let node = NodeId::new("n-1").unwrap();
        let t = JoinToken {
            product_uuid: Some("4c4c4544-0042".to_string()),
            ..token(now)
        };
        assert_eq!(t.check(&node, "4C4C4544-0042", now), Ok(()));
        let refused = t.check(&node, "ffff", now).unwrap_err();
        assert_eq!(refused.reason(), "wrong_machine");
        assert!(refused.to_string().contains("ffff"), "{refused}");
    }
}
