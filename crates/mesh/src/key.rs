//! WireGuard public keys as the mesh passes them around: 32 bytes, written in standard
//! base64 as `wg` prints them. Private keys are made on the node and never appear here.

use std::fmt;
use std::str::FromStr;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A WireGuard (X25519) public key.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PublicKey(pub [u8; 32]);

/// Why a text is not a public key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a WireGuard public key (44 characters of base64 for 32 bytes)")]
pub struct KeyError;

impl PublicKey {
    pub fn from_slice(bytes: &[u8]) -> Result<PublicKey, KeyError> {
        <[u8; 32]>::try_from(bytes)
            .map(PublicKey)
            .map_err(|_| KeyError)
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl FromStr for PublicKey {
    type Err = KeyError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bytes = STANDARD.decode(text.trim()).map_err(|_| KeyError)?;
        PublicKey::from_slice(&bytes)
    }
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&STANDARD.encode(self.0))
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({self})")
    }
}

impl Serialize for PublicKey {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PublicKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_read_and_write_as_wg_prints_them() {
        let text = "HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw=";
        let key: PublicKey = text.parse().unwrap();
        assert_eq!(key.to_string(), text);
        assert_eq!(serde_json::to_string(&key).unwrap(), format!("\"{text}\""));
        assert_eq!(
            serde_json::from_str::<PublicKey>(&format!("\"{text}\"")).unwrap(),
            key
        );
        assert_eq!("abc".parse::<PublicKey>(), Err(KeyError));
        assert_eq!("AAAA".parse::<PublicKey>(), Err(KeyError), "too short");
    }
}
