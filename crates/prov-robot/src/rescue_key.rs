//! A new rescue key pair: an Ed25519 key in OpenSSH format, for an account that has none
//! yet (`orc up` makes one for the emulated account).
//!
//! The private half is returned zeroized-on-drop and is meant to go straight into a file
//! that only its owner reads; nothing here logs or prints it.

use getrandom::SysRng;
use rand_core::UnwrapErr;
use russh::keys::ssh_key::LineEnding;
use russh::keys::{Algorithm, PrivateKey};

/// A freshly generated rescue key.
pub struct RescueKey {
    /// The private key in OpenSSH format (sensitive).
    pub private_openssh: zeroize::Zeroizing<String>,
    /// The public key line (`ssh-ed25519 AAAA… comment`), to store in Robot (which then
    /// names it by its fingerprint).
    pub public_openssh: String,
}

impl std::fmt::Debug for RescueKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RescueKey")
            .field("public_openssh", &self.public_openssh)
            .finish_non_exhaustive()
    }
}

/// Why a key could not be made.
#[derive(Debug, thiserror::Error)]
#[error("cannot generate an SSH key: {0}")]
pub struct KeygenError(String);

/// Generates an Ed25519 key pair with `comment` from the system's random source.
pub fn generate(comment: &str) -> Result<RescueKey, KeygenError> {
    let mut rng = UnwrapErr(SysRng);
    let mut key =
        PrivateKey::random(&mut rng, Algorithm::Ed25519).map_err(|e| KeygenError(e.to_string()))?;
    key.set_comment(comment);
    let private_openssh = key
        .to_openssh(LineEnding::LF)
        .map_err(|e| KeygenError(e.to_string()))?;
    let public_openssh = key
        .public_key()
        .to_openssh()
        .map_err(|e| KeygenError(e.to_string()))?;
    Ok(RescueKey {
        private_openssh,
        public_openssh,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_key_parses_back_and_keys_differ() {
        let one = generate("orc-test").unwrap();
        let two = generate("orc-test").unwrap();
        assert_ne!(one.public_openssh, two.public_openssh);
        assert!(one.public_openssh.starts_with("ssh-ed25519 "));
        assert!(one.public_openssh.ends_with(" orc-test"));
        let parsed = PrivateKey::from_openssh(one.private_openssh.as_bytes()).unwrap();
        assert_eq!(
            parsed.public_key().to_openssh().unwrap(),
            one.public_openssh
        );
        assert!(!format!("{one:?}").contains("PRIVATE"));
    }
}
