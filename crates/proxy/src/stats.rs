//! Counters per route, kept by route name so they carry over from one table to the next.
//!
//! The hot path only adds to atomics it reaches through its route ([`RouteCounters`]); the
//! registry's lock is taken when a table is set and when [`Proxy::stats`](crate::Proxy::stats)
//! takes a snapshot, never per request. A route name that leaves the table leaves the
//! registry with it, so its figures start again from zero if it comes back.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// What the proxy has counted for one route since the route name entered the table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RouteStats {
    /// HTTP requests routed to it (whatever their outcome).
    pub requests: u64,
    /// HTTP requests the proxy answered itself with `502`, `503` or `504`, and TCP
    /// connections it closed because no backend took them.
    pub proxy_errors: u64,
    /// TCP connections accepted for it.
    pub tcp_connections: u64,
    /// Bytes TCP clients sent, counted as they pass.
    pub tcp_bytes_from_clients: u64,
    /// Bytes sent to TCP clients, counted as they pass.
    pub tcp_bytes_to_clients: u64,
}

/// A snapshot of the proxy's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyStats {
    /// By route name (`app/service`).
    pub routes: BTreeMap<String, RouteStats>,
    /// HTTP requests answered `404` because no route matched their host.
    pub unrouted_requests: u64,
    /// Client connections open now, on every listener, including upgraded ones.
    pub open_connections: usize,
}

/// The live counters of one route name.
#[derive(Debug, Default)]
pub(crate) struct RouteCounters {
    pub requests: AtomicU64,
    pub proxy_errors: AtomicU64,
    pub tcp_connections: AtomicU64,
    pub tcp_bytes_from_clients: AtomicU64,
    pub tcp_bytes_to_clients: AtomicU64,
}

impl RouteCounters {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    fn snapshot(&self) -> RouteStats {
        RouteStats {
            requests: self.requests.load(Ordering::Relaxed),
            proxy_errors: self.proxy_errors.load(Ordering::Relaxed),
            tcp_connections: self.tcp_connections.load(Ordering::Relaxed),
            tcp_bytes_from_clients: self.tcp_bytes_from_clients.load(Ordering::Relaxed),
            tcp_bytes_to_clients: self.tcp_bytes_to_clients.load(Ordering::Relaxed),
        }
    }
}

/// Every route name's counters, and those that belong to no route.
#[derive(Debug, Default)]
pub(crate) struct StatsRegistry {
    routes: Mutex<HashMap<String, Arc<RouteCounters>>>,
    pub unrouted_requests: AtomicU64,
}

impl StatsRegistry {
    /// Replaces the set of known route names by `names`, keeping the counters of those that
    /// stay, and returns the counters of each.
    pub fn retain(
        &self,
        names: impl IntoIterator<Item = String>,
    ) -> HashMap<String, Arc<RouteCounters>> {
        let mut routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
        let kept: HashMap<String, Arc<RouteCounters>> = names
            .into_iter()
            .map(|name| {
                let counters = routes.get(&name).cloned().unwrap_or_default();
                (name, counters)
            })
            .collect();
        routes.clone_from(&kept);
        kept
    }

    pub fn snapshot(&self, open_connections: usize) -> ProxyStats {
        let routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
        ProxyStats {
            routes: routes
                .iter()
                .map(|(name, counters)| (name.clone(), counters.snapshot()))
                .collect(),
            unrouted_requests: self.unrouted_requests.load(Ordering::Relaxed),
            open_connections,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_carry_over_for_names_that_stay_and_restart_for_names_that_left() {
        let registry = StatsRegistry::default();
        let first = registry.retain(["a/web".to_string(), "b/api".to_string()]);
        RouteCounters::add(&first["a/web"].requests, 3);
        RouteCounters::add(&first["b/api"].requests, 5);

        let second = registry.retain(["a/web".to_string()]);
        assert!(Arc::ptr_eq(&first["a/web"], &second["a/web"]));
        let third = registry.retain(["a/web".to_string(), "b/api".to_string()]);

        let stats = registry.snapshot(0);
        assert_eq!(stats.routes["a/web"].requests, 3);
        assert_eq!(stats.routes["b/api"].requests, 0);
        assert!(!Arc::ptr_eq(&first["b/api"], &third["b/api"]));
    }
}
