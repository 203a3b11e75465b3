//! Users' passwords: hashed with Argon2id (the `argon2` crate's default parameters: 19 MiB,
//! two passes), kept by the store as PHC strings, checked in constant time.
//!
//! A check for a user who has no password, or does not exist, still computes one hash, so
//! the time of an answer does not tell whether a user name exists. Hashing takes tens of
//! milliseconds: callers run it off the async runtime ([`hash_blocking`],
//! [`verify_blocking`]).

use argon2::Argon2;
use argon2::password_hash::phc::PasswordHash;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};

/// The shortest password accepted.
pub const MIN_LENGTH: usize = 12;
/// The longest password accepted (longer ones only cost hashing time).
pub const MAX_LENGTH: usize = 1024;

/// Why a password is not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PasswordError {
    #[error("the password is shorter than {MIN_LENGTH} characters")]
    TooShort,
    #[error("the password is longer than {MAX_LENGTH} characters")]
    TooLong,
    #[error("the password could not be hashed")]
    Hash,
}

/// Checks a new password's length.
pub fn check_new(password: &str) -> Result<(), PasswordError> {
    let chars = password.chars().count();
    if chars < MIN_LENGTH {
        return Err(PasswordError::TooShort);
    }
    if password.len() > MAX_LENGTH {
        return Err(PasswordError::TooLong);
    }
    Ok(())
}

/// The PHC string of `password` with a fresh random salt.
pub fn hash(password: &str) -> Result<String, PasswordError> {
    check_new(password)?;
    Argon2::default()
        .hash_password(password.as_bytes())
        .map(|h| h.to_string())
        .map_err(|_| PasswordError::Hash)
}

/// A hash that no password opens in practice, checked against when there is no real one.
const DECOY: &str = "$argon2id$v=19$m=19456,t=2,p=1$b3JjLWRlY295LXNhbHQ$\
                     pW3sQ0m3xq5U1T0pQ8sWm2b4n3yZ2r9yQn0u4dLxQ6A";

/// Whether `password` opens `stored` (a PHC string); `None` checks against a decoy and
/// answers no, in about the same time.
pub fn verify(password: &str, stored: Option<&str>) -> bool {
    let candidate = stored.unwrap_or(DECOY);
    let Ok(parsed) = PasswordHash::new(candidate) else {
        return false;
    };
    let opened = password.len() <= MAX_LENGTH
        && Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok();
    opened && stored.is_some()
}

/// [`hash`] on a blocking thread.
pub async fn hash_blocking(password: String) -> Result<String, PasswordError> {
    tokio::task::spawn_blocking(move || hash(&password))
        .await
        .map_err(|_| PasswordError::Hash)?
}

/// [`verify`] on a blocking thread.
pub async fn verify_blocking(password: String, stored: Option<String>) -> bool {
    tokio::task::spawn_blocking(move || verify(&password, stored.as_deref()))
        .await
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_opens_its_own_hash_only() {
        let stored = hash("correct horse battery").unwrap();
        assert!(stored.starts_with("$argon2id$"));
        assert!(!stored.contains("correct"));
        assert!(verify("correct horse battery", Some(&stored)));
        assert!(!verify("correct horse batterx", Some(&stored)));
        assert!(!verify("correct horse battery", None));
        assert!(!verify("anything at all", Some("not a phc string")));
        assert_ne!(hash("correct horse battery").unwrap(), stored, "salted");
        assert_eq!(hash("short"), Err(PasswordError::TooShort));
        assert_eq!(
            hash(&"x".repeat(MAX_LENGTH + 1)),
            Err(PasswordError::TooLong)
        );
        assert!(PasswordHash::new(DECOY).is_ok(), "the decoy parses");
    }
}
