//! The replica's quote state ([`QuoteState`]: caps, reservations, cooldowns, counting, live
//! sites) behind one lock, and the sites of the nodes it knows.
//!
//! Invariants: the lock is held only for a pure step of the state, never across I/O or an
//! `.await`; the pure crate decides what each step means.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use orc_partner::ids::{NodeId, SiteName};
use orc_partner::state::QuoteState;

use crate::sync::lock;

/// The quote state, shared by quotes, deploys, destroys, counts and the site guard.
#[derive(Debug, Default)]
pub(crate) struct QuoteBook {
    state: Mutex<QuoteState>,
}

impl QuoteBook {
    /// Runs one step of the state.
    pub(crate) fn with<T>(&self, step: impl FnOnce(&mut QuoteState) -> T) -> T {
        step(&mut self.lock())
    }

    /// A copy of the state.
    pub(crate) fn snapshot(&self) -> QuoteState {
        self.lock().clone()
    }

    /// Forgets the node's reservation (the zone quotes it afresh).
    pub(crate) fn release(&self, node: &str) {
        if let Ok(node) = NodeId::new(node) {
            self.lock().release(&node);
        }
    }

    fn lock(&self) -> MutexGuard<'_, QuoteState> {
        lock(&self.state)
    }
}

/// Sites of nodes this replica deployed or saw in an inventory, so a re-quote of a node
/// that already has an instance stays at its site.
#[derive(Debug, Default)]
pub(crate) struct KnownSites {
    sites: Mutex<BTreeMap<String, SiteName>>,
}

impl KnownSites {
    /// Where `node` is known to run.
    pub(crate) fn site_of(&self, node: &str) -> Option<SiteName> {
        self.lock().get(node).cloned()
    }

    /// Records that `node` runs at `site`.
    pub(crate) fn remember(&self, node: &str, site: SiteName) {
        self.lock().insert(node.to_string(), site);
    }

    /// Forgets `node` (it was destroyed).
    pub(crate) fn forget(&self, node: &str) {
        self.lock().remove(node);
    }

    /// Replaces everything with what a complete inventory found.
    pub(crate) fn replace(&self, sites: BTreeMap<String, SiteName>) {
        *self.lock() = sites;
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, SiteName>> {
        lock(&self.sites)
    }
}
