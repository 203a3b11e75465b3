//! Sealing of the secrets the store keeps: sensitive app params, the access edge's private
//! keys and projects' secrets never reach the database in clear, so neither do they reach its
//! files, its backups or a PostgreSQL replica.
//!
//! Each value is sealed on its own with ChaCha20-Poly1305 under the zone's sealing key (32
//! random bytes kept outside the database, see [`SealingKey`]), with a fresh random nonce, and
//! bound to where it belongs (the pool id and the param name are the associated data), so a
//! sealed value copied into another pool or param does not open. Stored text:
//! `sealed:v1:<key id>:<base64url(nonce ‖ ciphertext ‖ tag)>`. The key id (the first 8 bytes
//! of the key's SHA-256, in hex) names the key without revealing it; the store records the id
//! of the key that sealed its values, and [`Store::set_sealing_key`](crate::Store) refuses a
//! different one, so a zone started with the wrong key file stops at once instead of failing
//! on the first deploy.

use std::fmt;
use std::io::Write as _;
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use orc_zone_model::PoolId;
use sha2::{Digest, Sha256};

use crate::error::OperationExt as _;
use crate::pools::param_context;
use crate::rows::to_json;
use crate::{Engine, Store, StoreError, StoreResult};
use std::collections::BTreeMap;

/// Prefix of every sealed value.
pub const SEALED_PREFIX: &str = "sealed:v1:";
const NONCE_LEN: usize = 12;

/// Why a sealing key could not be read, made or used.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    /// The key file could not be read or written.
    #[error("the sealing key file {path} cannot be used: {source}")]
    File {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The key file does not hold a key.
    #[error("the sealing key file {path} does not hold a key (expected 64 hex digits on one line)")]
    Malformed { path: String },
    /// A sealed value does not open with this key (another key, or changed text).
    #[error("a sealed value of {what} does not open with sealing key {key_id}")]
    Open { what: String, key_id: String },
}

/// The zone's sealing key. Its `Debug` shows only its id.
#[derive(Clone)]
pub struct SealingKey {
    key: [u8; 32],
    id: String,
}

impl fmt::Debug for SealingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SealingKey({})", self.id)
    }
}

impl SealingKey {
    /// A key from its 32 bytes.
    pub fn from_bytes(key: [u8; 32]) -> SealingKey {
        let digest = Sha256::digest(key);
        let id = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        SealingKey { key, id }
    }

    /// A fresh random key.
    pub fn generate() -> SealingKey {
        SealingKey::from_bytes(rand::random())
    }

    /// The key's id: the first 8 bytes of its SHA-256, in hex.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Reads the key at `path`, creating it (mode 0600, never replaced) when the file does not
    /// exist. Returns the key and whether it was created now.
    pub fn load_or_create(path: &Path) -> Result<(SealingKey, bool), SealError> {
        let file_error = |source| SealError::File {
            path: path.display().to_string(),
            source,
        };
        match std::fs::read_to_string(path) {
            Ok(text) => Ok((SealingKey::parse(path, &text)?, false)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let key = SealingKey::generate();
                let mut options = std::fs::OpenOptions::new();
                // `create_new`: two controllers starting at once never overwrite each other.
                options.write(true).create_new(true);
                #[cfg(unix)]
                {
                    use std::os::unix::fs::OpenOptionsExt as _;
                    options.mode(0o600);
                }
                let mut file = match options.open(path) {
                    Ok(file) => file,
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        let text = std::fs::read_to_string(path).map_err(file_error)?;
                        return Ok((SealingKey::parse(path, &text)?, false));
                    }
                    Err(e) => return Err(file_error(e)),
                };
                let hex: String = key.key.iter().map(|b| format!("{b:02x}")).collect();
                writeln!(file, "{hex}").map_err(file_error)?;
                file.sync_all().map_err(file_error)?;
                Ok((key, true))
            }
            Err(e) => Err(file_error(e)),
        }
    }

    fn parse(path: &Path, text: &str) -> Result<SealingKey, SealError> {
        let malformed = || SealError::Malformed {
            path: path.display().to_string(),
        };
        let text = text.trim();
        if text.len() != 64 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(malformed());
        }
        let mut key = [0u8; 32];
        for (i, byte) in key.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).map_err(|_| malformed())?;
        }
        Ok(SealingKey::from_bytes(key))
    }

    /// Seals `plain`, bound to `context` (e.g. `pool pl-…/param hetzner_api_token`).
    pub fn seal(&self, context: &str, plain: &str) -> String {
        let cipher = ChaCha20Poly1305::new(Key::from_slice(&self.key));
        let nonce: [u8; NONCE_LEN] = rand::random();
        let sealed = cipher
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: plain.as_bytes(),
                    aad: context.as_bytes(),
                },
            )
            .expect("ChaCha20-Poly1305 seals any message shorter than 256 GiB");
        let mut bytes = nonce.to_vec();
        bytes.extend_from_slice(&sealed);
        format!(
            "{SEALED_PREFIX}{}:{}",
            self.id,
            URL_SAFE_NO_PAD.encode(bytes)
        )
    }

    /// Opens a value [`seal`](Self::seal) made for the same `context`.
    pub fn open(&self, context: &str, text: &str) -> Result<String, SealError> {
        let fail = || SealError::Open {
            what: context.to_string(),
            key_id: self.id.clone(),
        };
        let rest = text.strip_prefix(SEALED_PREFIX).ok_or_else(fail)?;
        let (key_id, body) = rest.split_once(':').ok_or_else(fail)?;
        if key_id != self.id {
            return Err(fail());
        }
        let bytes = URL_SAFE_NO_PAD.decode(body).map_err(|_| fail())?;
        if bytes.len() < NONCE_LEN {
            return Err(fail());
        }
        let (nonce, sealed) = bytes.split_at(NONCE_LEN);
        let cipher = ChaCha20Poly1305::new(Key::from_slice(&self.key));
        let plain = cipher
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: sealed,
                    aad: context.as_bytes(),
                },
            )
            .map_err(|_| fail())?;
        String::from_utf8(plain).map_err(|_| fail())
    }
}

/// Whether `text` is a sealed value (as opposed to one stored before sealing existed).
pub fn is_sealed(text: &str) -> bool {
    text.starts_with(SEALED_PREFIX)
}

/// The name of the `zone_meta` row holding the id of the store's sealing key.
const KEY_ID_ROW: &str = "sealing_key_id";

impl Store {
    /// The sealing key, once given.
    pub(crate) fn sealing_key(&self) -> Option<&SealingKey> {
        self.sealing.get()
    }

    /// Gives the store the key its sensitive values are sealed with, and reseals any value
    /// stored in clear before sealing existed. A store that already holds values sealed with
    /// another key refuses it ([`StoreError::WrongSealingKey`]); a store's key is given once
    /// (a second call with the same key is a no-op). Returns how many values were resealed.
    pub async fn set_sealing_key(&self, key: SealingKey) -> StoreResult<u64> {
        if let Some(current) = self.sealing.get() {
            return if current.id() == key.id() {
                Ok(0)
            } else {
                Err(StoreError::WrongSealingKey {
                    sealed_with: current.id().to_string(),
                    given: key.id().to_string(),
                })
            };
        }
        let mut tx = self.begin("record the sealing key").await?;
        let recorded: Option<String> =
            sqlx::query_scalar("SELECT value FROM zone_meta WHERE name = $1")
                .bind(KEY_ID_ROW)
                .fetch_optional(&mut *tx)
                .await
                .op("read the sealing key id")?;
        match recorded {
            Some(id) if id != key.id() => {
                return Err(StoreError::WrongSealingKey {
                    sealed_with: id,
                    given: key.id().to_string(),
                });
            }
            Some(_) => {}
            None => {
                sqlx::query("INSERT INTO zone_meta (name, value) VALUES ($1, $2)")
                    .bind(KEY_ID_ROW)
                    .bind(key.id())
                    .execute(&mut *tx)
                    .await
                    .op("record the sealing key id")?;
            }
        }
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT id, app_sensitive_params FROM pools WHERE app_sensitive_params <> '{}'",
        )
        .fetch_all(&mut *tx)
        .await
        .op("read sensitive params to reseal")?;
        let mut resealed = 0u64;
        for (id, stored) in rows {
            let column = "pools.app_sensitive_params";
            let params: BTreeMap<String, String> =
                serde_json::from_str(&stored).map_err(|e| StoreError::Corrupt {
                    column: column.to_string(),
                    reason: e.to_string(),
                })?;
            let pool: PoolId =
                id.parse()
                    .map_err(|e: orc_zone_model::MalformedId| StoreError::Corrupt {
                        column: "pools.id".to_string(),
                        reason: e.to_string(),
                    })?;
            let mut changed = false;
            let sealed: BTreeMap<String, String> = params
                .into_iter()
                .map(|(name, text)| {
                    if is_sealed(&text) {
                        (name, text)
                    } else {
                        changed = true;
                        resealed += 1;
                        let sealed = key.seal(&param_context(&pool, &name), &text);
                        (name, sealed)
                    }
                })
                .collect();
            if changed {
                sqlx::query("UPDATE pools SET app_sensitive_params = $2 WHERE id = $1")
                    .bind(pool.as_str())
                    .bind(to_json(&sealed))
                    .execute(&mut *tx)
                    .await
                    .op("reseal sensitive params")?;
            }
        }
        tx.commit().await.op("record the sealing key")?;
        if resealed > 0 && self.engine == Engine::Sqlite {
            // The clear text may still sit in the write-ahead log and in free pages until
            // they are reused: fold the log into the file and rewrite it.
            sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
                .execute(&self.pool)
                .await
                .op("checkpoint after resealing")?;
            sqlx::query("VACUUM")
                .execute(&self.pool)
                .await
                .op("vacuum after resealing")?;
            sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
                .execute(&self.pool)
                .await
                .op("checkpoint after resealing")?;
        }
        // Two callers racing here both checked the same recorded id, so either key is right.
        let _ = self.sealing.set(key);
        Ok(resealed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_value_opens_only_with_its_key_and_context() {
        let key = SealingKey::generate();
        let sealed = key.seal("pool pl-1/param token", "s3cret-value");
        assert!(is_sealed(&sealed));
        assert!(!sealed.contains("s3cret"), "{sealed}");
        assert_eq!(
            key.open("pool pl-1/param token", &sealed).unwrap(),
            "s3cret-value"
        );
        let moved = key.open("pool pl-2/param token", &sealed).unwrap_err();
        assert_eq!(
            moved.to_string(),
            format!(
                "a sealed value of pool pl-2/param token does not open with sealing key {}",
                key.id()
            )
        );
        assert!(
            SealingKey::generate()
                .open("pool pl-1/param token", &sealed)
                .is_err()
        );
        let mut tampered = sealed.clone();
        tampered.pop();
        assert!(key.open("pool pl-1/param token", &tampered).is_err());
        assert_ne!(
            key.seal("c", "same"),
            key.seal("c", "same"),
            "fresh nonce each time"
        );
    }

    #[test]
    fn the_key_file_is_made_once_private_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sealing-key");
        let (made, created) = SealingKey::load_or_create(&path).unwrap();
        assert!(created);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let (read, created) = SealingKey::load_or_create(&path).unwrap();
        assert!(!created);
        assert_eq!(read.id(), made.id());
        assert!(!format!("{read:?}").contains(&std::fs::read_to_string(&path).unwrap()[..16]));
        std::fs::write(&path, "not a key\n").unwrap();
        assert_eq!(
            SealingKey::load_or_create(&path).unwrap_err().to_string(),
            format!(
                "the sealing key file {} does not hold a key (expected 64 hex digits on one line)",
                path.display()
            )
        );
    }
}
