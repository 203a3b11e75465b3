//! Requests sent per operation, shared by every clone of a client.
//!
//! An operation is a stable name such as `hetzner.servers.create`. Every attempt counts,
//! retries and pages included, so the counters measure what an operation really costs
//! against the provider's rate limit.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Per-operation request counters.
#[derive(Debug, Clone, Default)]
pub struct RequestCounters {
    inner: Arc<Mutex<BTreeMap<&'static str, u64>>>,
}

impl RequestCounters {
    pub(crate) fn record(&self, operation: &'static str) {
        let mut map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        *map.entry(operation).or_default() += 1;
    }

    /// The counts so far, by operation name.
    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        let map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        map.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    /// Requests sent for one operation.
    pub fn get(&self, operation: &str) -> u64 {
        let map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        map.get(operation).copied().unwrap_or(0)
    }

    /// Requests sent in total.
    pub fn total(&self) -> u64 {
        let map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        map.values().sum()
    }

    /// Forgets every count (clones see it too).
    pub fn reset(&self) {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_counts() {
        let a = RequestCounters::default();
        let b = a.clone();
        a.record("x.list");
        b.record("x.list");
        b.record("x.get");
        assert_eq!(a.get("x.list"), 2);
        assert_eq!(a.total(), 3);
        let snap = a.snapshot();
        assert_eq!(snap.keys().collect::<Vec<_>>(), ["x.get", "x.list"]);
        b.reset();
        assert_eq!(a.total(), 0);
    }
}
