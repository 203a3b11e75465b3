//! The access edge's signing keys, kept in the store (sealed) and published as a JWKS at
//! [`orc_access::JWKS_PATH`] on the zone's web URL.
//!
//! The zone makes its first key at its first start. `orc zone rotate-access-key` makes a
//! new key the signing one; the one it replaces stays published for the overlap (default
//! 1 h, so assertions it signed and apps' cached key sets keep checking), then it is no
//! longer published and the next rotation deletes it. The JWKS is read from the store on
//! each request, so every controller of the zone publishes the same keys.

use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use orc_access::{Assertion, KeyRing, SigningKey};
use serde_json::Value;

use crate::model::Timestamp;
use orc_zone_model::session::StoredAccessKey;

use crate::store::{EdgeStore, StoreFailure};

/// The longest overlap a rotation may ask for.
pub const MAX_OVERLAP: Duration = Duration::from_secs(7 * 24 * 3600);

/// The overlap when a rotation names none.
pub const DEFAULT_OVERLAP: Duration = Duration::from_secs(3600);

/// Why the access keys cannot be read, made or used.
#[derive(Debug, thiserror::Error)]
pub enum AccessKeyError {
    #[error(transparent)]
    Store(#[from] StoreFailure),
    #[error(transparent)]
    Key(#[from] orc_access::keys::KeyError),
    #[error("the store holds access keys but none is current")]
    NoCurrent,
}

/// What a rotation did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rotated {
    /// The new signing key.
    pub kid: String,
    /// The key it replaced, and until when that one stays published.
    pub replaced: Option<(String, Timestamp)>,
}

/// The zone's access keys.
pub struct AccessKeys {
    store: Arc<dyn EdgeStore>,
    /// The ring as this controller last read or changed it; it signs.
    ring: RwLock<KeyRing>,
}

impl std::fmt::Debug for AccessKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessKeys").finish_non_exhaustive()
    }
}

fn secs(at: Timestamp) -> u64 {
    u64::try_from(at.millis() / 1000).unwrap_or(0)
}

/// The ring of the keys the store publishes at `now` (current first).
fn ring_of(keys: &[StoredAccessKey]) -> Result<Option<KeyRing>, AccessKeyError> {
    let Some(current) = keys.iter().find(|k| k.retire_at.is_none()) else {
        return if keys.is_empty() {
            Ok(None)
        } else {
            Err(AccessKeyError::NoCurrent)
        };
    };
    let retiring = keys
        .iter()
        .filter_map(|k| {
            let until = k.retire_at?;
            Some(SigningKey::from_pkcs8(Some(&k.kid), &k.pkcs8).map(|key| (key, secs(until))))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(KeyRing::with_retiring(
        SigningKey::from_pkcs8(Some(&current.kid), &current.pkcs8)?,
        retiring,
    )))
}

impl AccessKeys {
    /// The keys of the store, with a first one made and stored when there is none.
    pub async fn load(
        store: Arc<dyn EdgeStore>,
        now: Timestamp,
    ) -> Result<AccessKeys, AccessKeyError> {
        let ring = match ring_of(&store.access_keys(now).await?)? {
            Some(ring) => ring,
            None => {
                let key = SigningKey::generate()?;
                store
                    .add_access_key(key.kid(), key.pkcs8(), now, now)
                    .await?;
                tracing::info!(kid = key.kid(), "access key created");
                KeyRing::new(key)
            }
        };
        Ok(AccessKeys {
            store,
            ring: RwLock::new(ring),
        })
    }

    /// The JWKS document at `now`, as the store holds the keys.
    pub async fn jwks(&self, now: Timestamp) -> Result<Value, AccessKeyError> {
        let ring =
            ring_of(&self.store.access_keys(now).await?)?.ok_or(AccessKeyError::NoCurrent)?;
        Ok(ring.jwks())
    }

    /// The keys published at `now`, current first.
    pub async fn list(&self, now: Timestamp) -> Result<Vec<StoredAccessKey>, AccessKeyError> {
        Ok(self.store.access_keys(now).await?)
    }

    /// Makes a new key the signing one; the one it replaces stays published for `overlap`.
    pub async fn rotate(
        &self,
        now: Timestamp,
        overlap: Duration,
    ) -> Result<Rotated, AccessKeyError> {
        let before = self.store.access_keys(now).await?;
        let replaced = before
            .iter()
            .find(|k| k.retire_at.is_none())
            .map(|k| (k.kid.clone(), now.plus(overlap)));
        let key = SigningKey::generate()?;
        self.store
            .add_access_key(key.kid(), key.pkcs8(), now, now.plus(overlap))
            .await?;
        let ring =
            ring_of(&self.store.access_keys(now).await?)?.ok_or(AccessKeyError::NoCurrent)?;
        *self.ring.write().unwrap_or_else(PoisonError::into_inner) = ring;
        tracing::info!(kid = key.kid(), replaced = ?replaced.as_ref().map(|r| &r.0), "access key rotated");
        Ok(Rotated {
            kid: key.kid().to_string(),
            replaced,
        })
    }

    /// `assertion`, signed with the current key.
    pub fn sign(&self, assertion: &Assertion) -> Result<String, AccessKeyError> {
        Ok(self
            .ring
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .sign(assertion)?)
    }
}
