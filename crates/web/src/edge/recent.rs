//! What the edge keeps for a moment so that a page's burst of requests (its HTML, styles,
//! scripts, an event stream) costs one set of store reads: who a credential belongs to,
//! and an org's pools.
//!
//! Entries live [`PERSON_TTL`] or [`ORG_TTL`] on the edge's clock. So a revoked token, a
//! removed role or a session ended on another controller takes effect within that time;
//! signing out at this controller takes effect at once. Credentials are kept by their
//! SHA-256, never in clear. The map is bounded: when full it is emptied.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use crate::model::Timestamp;

/// How long who-a-credential-is is kept.
pub const PERSON_TTL_MS: i64 = 2_000;
/// How long an org's pools are kept.
pub const ORG_TTL_MS: i64 = 1_000;
/// Entries kept at most.
const MAX_ENTRIES: usize = 10_000;

/// Values by key, each until its time.
pub(super) struct Recent<V> {
    ttl_ms: i64,
    entries: Mutex<BTreeMap<String, (Timestamp, V)>>,
}

impl<V: Clone> Recent<V> {
    pub(super) fn new(ttl_ms: i64) -> Recent<V> {
        Recent {
            ttl_ms,
            entries: Mutex::new(BTreeMap::new()),
        }
    }

    /// The value kept for `key`, if it has not run out at `now`.
    pub(super) fn get(&self, key: &str, now: Timestamp) -> Option<V> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries
            .get(key)
            .filter(|(until, _)| now < *until)
            .map(|(_, value)| value.clone())
    }

    /// Keeps `value` for `key` from `now`.
    pub(super) fn put(&self, key: String, value: V, now: Timestamp) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        entries.insert(key, (now.plus_millis(self.ttl_ms), value));
    }

    /// Drops `key` (signing out).
    pub(super) fn forget(&self, key: &str) {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_hold_until_their_time_and_can_be_forgotten() {
        let recent = Recent::new(1_000);
        let t0 = Timestamp::from_unix_millis(10_000);
        recent.put("a".into(), 1, t0);
        assert_eq!(recent.get("a", t0.plus_millis(999)), Some(1));
        assert_eq!(recent.get("a", t0.plus_millis(1_000)), None);
        recent.put("b".into(), 2, t0);
        recent.forget("b");
        assert_eq!(recent.get("b", t0), None);
    }
}
