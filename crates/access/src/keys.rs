//! The edge's signing keys: ES256 (ECDSA P-256 with SHA-256), made with `ring`, one current
//! key that signs and keys replaced by a rotation that stay published for an overlap.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _};
use serde_json::{Value, json};
use zeroize::Zeroizing;

use crate::claims::Assertion;

/// Why a key cannot be made or read.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("no P-256 key could be generated")]
    Generate,
    #[error("the stored access key {kid} is not a PKCS#8 P-256 key")]
    Unreadable { kid: String },
    #[error("the assertion could not be signed: {0}")]
    Sign(String),
}

/// One signing key. Its private half is zeroed when dropped and never shown by `Debug`.
#[derive(Clone)]
pub struct SigningKey {
    kid: String,
    pkcs8: Zeroizing<Vec<u8>>,
    /// The public point, uncompressed (`0x04 || x || y`).
    public: Vec<u8>,
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKey")
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

impl SigningKey {
    /// A new key. Its `kid` is made from its public point, so it names this key only.
    pub fn generate() -> Result<SigningKey, KeyError> {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|_| KeyError::Generate)?;
        SigningKey::from_pkcs8(None, pkcs8.as_ref()).map_err(|_| KeyError::Generate)
    }

    /// The key stored as `pkcs8` under `kid` (`None`: a new key, named from its point).
    pub fn from_pkcs8(kid: Option<&str>, pkcs8: &[u8]) -> Result<SigningKey, KeyError> {
        let unreadable = || KeyError::Unreadable {
            kid: kid.unwrap_or("(new)").to_string(),
        };
        let pair = EcdsaKeyPair::from_pkcs8(
            &ECDSA_P256_SHA256_FIXED_SIGNING,
            pkcs8,
            &SystemRandom::new(),
        )
        .map_err(|_| unreadable())?;
        let public = pair.public_key().as_ref().to_vec();
        if public.len() != 65 || public[0] != 4 {
            return Err(unreadable());
        }
        let kid = match kid {
            Some(kid) => kid.to_string(),
            None => {
                let digest = ring::digest::digest(&ring::digest::SHA256, &public);
                format!("orc-{}", &URL_SAFE_NO_PAD.encode(digest.as_ref())[..16])
            }
        };
        Ok(SigningKey {
            kid,
            pkcs8: Zeroizing::new(pkcs8.to_vec()),
            public,
        })
    }

    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The private key as PKCS#8 DER, to be kept sealed.
    pub fn pkcs8(&self) -> &[u8] {
        &self.pkcs8
    }

    /// The public key as a JWK.
    pub fn jwk(&self) -> Value {
        json!({
            "kty": "EC",
            "crv": "P-256",
            "x": URL_SAFE_NO_PAD.encode(&self.public[1..33]),
            "y": URL_SAFE_NO_PAD.encode(&self.public[33..65]),
            "kid": self.kid,
            "alg": crate::ALGORITHM,
            "use": "sig",
        })
    }

    /// `assertion`, signed with this key.
    pub fn sign(&self, assertion: &Assertion) -> Result<String, KeyError> {
        let header = Header {
            typ: Some("JWT".to_string()),
            kid: Some(self.kid.clone()),
            ..Header::new(Algorithm::ES256)
        };
        jsonwebtoken::encode(&header, assertion, &EncodingKey::from_ec_der(&self.pkcs8))
            .map_err(|e| KeyError::Sign(e.to_string()))
    }
}

/// The edge's keys: the current one signs; the ones a rotation replaced are published until
/// their time (seconds since the Unix epoch), so assertions they signed still check.
#[derive(Debug, Clone)]
pub struct KeyRing {
    current: SigningKey,
    retiring: Vec<(SigningKey, u64)>,
}

impl KeyRing {
    pub fn new(current: SigningKey) -> KeyRing {
        KeyRing {
            current,
            retiring: Vec::new(),
        }
    }

    /// A ring as it was kept: the current key and the retiring ones with their times.
    pub fn with_retiring(current: SigningKey, retiring: Vec<(SigningKey, u64)>) -> KeyRing {
        KeyRing { current, retiring }
    }

    pub fn current(&self) -> &SigningKey {
        &self.current
    }

    /// The keys a rotation replaced, with the time each stops being published.
    pub fn retiring(&self) -> &[(SigningKey, u64)] {
        &self.retiring
    }

    /// Signs with the current key.
    pub fn sign(&self, assertion: &Assertion) -> Result<String, KeyError> {
        self.current.sign(assertion)
    }

    /// Makes `next` the signing key; the one it replaces stays published until
    /// `now + overlap_secs`.
    pub fn rotate(&mut self, next: SigningKey, now: u64, overlap_secs: u64) {
        let old = std::mem::replace(&mut self.current, next);
        self.retiring.push((old, now.saturating_add(overlap_secs)));
    }

    /// Drops the retiring keys whose time has come; their kids.
    pub fn retire(&mut self, now: u64) -> Vec<String> {
        let (gone, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.retiring)
            .into_iter()
            .partition(|(_, until)| *until <= now);
        self.retiring = kept;
        gone.into_iter().map(|(key, _)| key.kid).collect()
    }

    /// The JWKS document: the current key, then the retiring ones.
    pub fn jwks(&self) -> Value {
        let keys: Vec<Value> = std::iter::once(&self.current)
            .chain(self.retiring.iter().map(|(key, _)| key))
            .map(SigningKey::jwk)
            .collect();
        json!({ "keys": keys })
    }
}
