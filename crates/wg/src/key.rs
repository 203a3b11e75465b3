//! X25519 keys: a new private key from the operating system's random source, the public key
//! of a private key, and keys shown the way `wg` shows them (standard base64).

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use boringtun::x25519;

use crate::config::Key;
use crate::error::Error;

/// A new private key from the operating system's random source, clamped as `wg genkey`
/// clamps it.
pub fn generate_private_key() -> Result<Key, Error> {
    let mut key = [0u8; 32];
    getrandom::fill(&mut key).map_err(Error::Random)?;
    key[0] &= 248;
    key[31] &= 127;
    key[31] |= 64;
    Ok(key)
}

/// The public key of `private_key`.
pub fn public_key(private_key: &Key) -> Key {
    x25519::PublicKey::from(&x25519::StaticSecret::from(*private_key)).to_bytes()
}

/// Shows a public key in standard base64, as `wg` prints it.
pub(crate) struct KeyDisplay<'a>(pub &'a Key);

impl fmt::Display for KeyDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&STANDARD.encode(self.0))
    }
}

impl fmt::Debug for KeyDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A public key in standard base64 (for error messages and logs).
pub(crate) fn show(key: &Key) -> String {
    KeyDisplay(key).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_are_clamped_and_differ() {
        let a = generate_private_key().unwrap();
        let b = generate_private_key().unwrap();
        assert_ne!(a, b);
        assert_eq!(a[0] & 7, 0);
        assert_eq!(a[31] & 0xc0, 0x40);
    }

    #[test]
    fn public_key_matches_rfc7748_vector() {
        // RFC 7748 §6.1, Alice's key pair.
        let private = hex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a");
        let public = hex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a");
        assert_eq!(public_key(&private), public);
    }

    fn hex(text: &str) -> Key {
        let mut key = [0u8; 32];
        for (i, byte) in key.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).unwrap();
        }
        key
    }
}
