//! OpenSSH public keys, as a tenant gives them for a pool (`orc pool create --ssh-key
//! FILE`): one `authorized_keys` line each, `TYPE BASE64 [COMMENT]`.
//!
//! A key is checked in words a person can act on (a known type, base64 that names the same
//! type inside, a printable comment), then decoded in full by the `ssh-key` crate, which
//! also gives its fingerprint. Options before the type (`from="…"`, `command="…"`) are
//! refused: they would change what the key may do on the node, which is the provider's to
//! decide.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// The key types a pool's nodes accept.
pub const SSH_KEY_TYPES: [&str; 7] = [
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
];

/// The longest key line taken (an RSA 16384-bit key is about 2.8 KiB).
pub const SSH_KEY_MAX_BYTES: usize = 8 * 1024;

/// How many keys one pool holds at most.
pub const SSH_KEYS_MAX: usize = 20;

/// One OpenSSH public key.
#[derive(Clone, PartialEq, Eq)]
pub struct SshPublicKey {
    kind: String,
    base64: String,
    comment: String,
    fingerprint: String,
}

/// Why a line is not a public key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SshKeyError {
    #[error("is empty")]
    Empty,
    #[error("is longer than {SSH_KEY_MAX_BYTES} bytes")]
    TooLong,
    #[error("is a private key; give the public one (the .pub file)")]
    Private,
    #[error(
        "starts with {0:?}, which is not a key type (ssh-ed25519, ssh-rsa, ecdsa-sha2-nistp256, …)"
    )]
    UnknownType(String),
    #[error("has no key after its type")]
    NoBlob,
    #[error("holds a key that is not base64")]
    NotBase64,
    #[error("holds a key whose data does not name its type {0}")]
    Mismatch(String),
    #[error("has a comment with control characters")]
    BadComment,
    #[error("holds data that is not a valid {0} key")]
    Invalid(String),
}

impl SshPublicKey {
    /// Parses one `authorized_keys` line.
    pub fn parse(line: &str) -> Result<SshPublicKey, SshKeyError> {
        let line = line.trim();
        if line.is_empty() {
            return Err(SshKeyError::Empty);
        }
        if line.len() > SSH_KEY_MAX_BYTES {
            return Err(SshKeyError::TooLong);
        }
        if line.starts_with("-----BEGIN") {
            return Err(SshKeyError::Private);
        }
        let (kind, rest) = first_word(line);
        if !SSH_KEY_TYPES.contains(&kind) {
            return Err(SshKeyError::UnknownType(
                kind.chars().take(40).collect::<String>(),
            ));
        }
        let (base64, comment) = first_word(rest);
        if base64.is_empty() {
            return Err(SshKeyError::NoBlob);
        }
        let blob = STANDARD
            .decode(base64)
            .map_err(|_| SshKeyError::NotBase64)?;
        // The blob starts with the type as an SSH string: a 4-byte big-endian length.
        let named = blob
            .get(..4)
            .map(|n| u32::from_be_bytes([n[0], n[1], n[2], n[3]]) as usize)
            .and_then(|len| blob.get(4..4 + len));
        if named != Some(kind.as_bytes()) {
            return Err(SshKeyError::Mismatch(kind.to_string()));
        }
        let comment = comment.to_string();
        if comment.chars().any(orc_common::text::is_unsafe) {
            return Err(SshKeyError::BadComment);
        }
        let decoded = ssh_key::PublicKey::from_openssh(&format!("{kind} {base64}"))
            .map_err(|_| SshKeyError::Invalid(kind.to_string()))?;
        Ok(SshPublicKey {
            kind: kind.to_string(),
            base64: base64.to_string(),
            comment,
            fingerprint: decoded.fingerprint(ssh_key::HashAlg::Sha256).to_string(),
        })
    }

    /// The type (`ssh-ed25519`).
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The comment (often `user@host`), or empty.
    pub fn comment(&self) -> &str {
        &self.comment
    }

    /// The fingerprint as `ssh-keygen -l` prints it: `SHA256:` and unpadded base64.
    pub fn fingerprint(&self) -> String {
        self.fingerprint.clone()
    }

    /// The key as one `authorized_keys` line, normalised (single spaces).
    pub fn line(&self) -> String {
        if self.comment.is_empty() {
            format!("{} {}", self.kind, self.base64)
        } else {
            format!("{} {} {}", self.kind, self.base64, self.comment)
        }
    }
}

/// The text up to the first space or tab, and the rest after the blanks that follow it.
fn first_word(text: &str) -> (&str, &str) {
    match text.split_once([' ', '\t']) {
        Some((word, rest)) => (word, rest.trim()),
        None => (text, ""),
    }
}

impl fmt::Debug for SshPublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SshPublicKey({} {})", self.kind, self.fingerprint())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real ed25519 public key (its private half was never kept).
    const ED25519: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl ann@laptop";

    #[test]
    fn a_public_key_parses_with_its_fingerprint() {
        let key = SshPublicKey::parse(&format!("  {ED25519}\n")).unwrap();
        assert_eq!(key.kind(), "ssh-ed25519");
        assert_eq!(key.comment(), "ann@laptop");
        assert_eq!(key.line(), ED25519);
        // As `ssh-keygen -l -f` prints it for this key.
        assert_eq!(
            key.fingerprint(),
            "SHA256:+DiY3wvvV6TuJJhbpZisF/zLDA0zPMSvHdkr4UvCOqU"
        );
        let spaced = ED25519.replace(' ', " \t ");
        assert_eq!(SshPublicKey::parse(&spaced).unwrap().line(), ED25519);
        let bare = ED25519.rsplit_once(' ').unwrap().0;
        assert_eq!(SshPublicKey::parse(bare).unwrap().line(), bare);
        assert_eq!(
            SshPublicKey::parse(bare).unwrap().fingerprint(),
            key.fingerprint(),
            "the comment is not part of the key"
        );
    }

    #[test]
    fn what_is_not_a_public_key_says_why() {
        let err = |line: &str| SshPublicKey::parse(line).unwrap_err().to_string();
        assert_eq!(err(""), "is empty");
        assert_eq!(
            err("-----BEGIN OPENSSH PRIVATE KEY-----"),
            "is a private key; give the public one (the .pub file)"
        );
        assert!(
            err("command=\"ls\" ssh-ed25519 AAAA")
                .starts_with("starts with \"command=\\\"ls\\\"\""),
            "{}",
            err("command=\"ls\" ssh-ed25519 AAAA")
        );
        assert_eq!(err("ssh-ed25519"), "has no key after its type");
        assert_eq!(
            err("ssh-ed25519 not*base64"),
            "holds a key that is not base64"
        );
        let rsa_named_ed = ED25519.replacen("ssh-ed25519", "ssh-rsa", 1);
        assert_eq!(
            err(&rsa_named_ed),
            "holds a key whose data does not name its type ssh-rsa"
        );
        let mut short = vec![0, 0, 0, 11];
        short.extend_from_slice(b"ssh-ed25519");
        short.extend_from_slice(&[0, 0, 0, 5, 1, 2, 3, 4, 5]);
        assert_eq!(
            err(&format!("ssh-ed25519 {}", STANDARD.encode(short))),
            "holds data that is not a valid ssh-ed25519 key"
        );
        assert_eq!(
            err(&format!("{ED25519}\u{202e}x")),
            "has a comment with control characters"
        );
        assert_eq!(
            err(&"a".repeat(SSH_KEY_MAX_BYTES + 1)),
            format!("is longer than {SSH_KEY_MAX_BYTES} bytes")
        );
    }
}
