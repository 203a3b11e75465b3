//! [`AdminView`]: the only way the page reaches the replica's state.
//!
//! It holds the replica's shared state privately and offers `&self` methods that answer
//! copies: the config by shared reference, and a [`Snapshot`] of everything else taken at one
//! instant (the catalogs, the quote state, what the inventory passes saw, the role). No method
//! changes anything, reaches a cloud client, reserves capacity or touches a param; the page's
//! handlers get this type and nothing else, so they cannot either.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use orc_common::ReplicaRole;
use orc_partner::admin::{InventorySeen, PageRole, PageState, ReplicaFacts};
use orc_partner::catalog::Catalogs;
use orc_partner::ids::{Cloud, Timestamp};
use orc_partner::params::Config;
use orc_partner::state::QuoteState;

use crate::naming;
use crate::provider::{PartnerProvider, Shared};

/// A read-only view of one replica's state, for the admin page. Cheap to clone.
#[derive(Debug, Clone)]
pub struct AdminView {
    shared: Arc<Shared>,
    facts: Arc<Facts>,
}

/// What does not change while the process runs.
#[derive(Debug)]
struct Facts {
    replica: ReplicaFacts,
    gateway_generations: BTreeMap<Cloud, String>,
    sealed_keys: BTreeMap<Cloud, String>,
}

/// Copies of the replica's state for one page.
#[derive(Debug)]
pub struct Snapshot<'a> {
    view: &'a AdminView,
    now: Timestamp,
    role: PageRole,
    catalogs: Catalogs,
    unread: BTreeMap<Cloud, String>,
    quotes: QuoteState,
    seen: Arc<InventorySeen>,
    guard_incomplete: BTreeSet<Cloud>,
}

impl Snapshot<'_> {
    /// The page state over this snapshot.
    pub fn page(&self) -> PageState<'_> {
        PageState {
            now: self.now,
            replica: &self.view.facts.replica,
            role: self.role,
            config: self.view.config(),
            catalogs: &self.catalogs,
            unread_catalogs: &self.unread,
            quotes: &self.quotes,
            seen: &self.seen,
            guard_incomplete: &self.guard_incomplete,
            gateway_generations: &self.view.facts.gateway_generations,
            sealed_keys: &self.view.facts.sealed_keys,
        }
    }
}

impl PartnerProvider {
    /// The admin page's read-only view of this replica.
    pub fn admin_view(&self) -> AdminView {
        let shared = self.shared.clone();
        let hello = &shared.hello;
        let replica = ReplicaFacts {
            host: hello.replica.host.clone(),
            pid: hello.replica.pid,
            slot: hello.replica.slot,
            version: hello.version.clone(),
            resource_uri: hello.resource_uri.as_str().to_string(),
        };
        let gateway_generations = Cloud::ALL
            .iter()
            .map(|c| (*c, naming::gateway_generation(&shared.config, *c)))
            .collect();
        let sealed_keys = shared
            .ownership
            .iter()
            .filter_map(|(cloud, ownership)| {
                let owner = ownership.tags.first()?;
                Some((*cloud, naming::sealed_key_name(&ownership.child, owner)))
            })
            .collect();
        AdminView {
            shared,
            facts: Arc::new(Facts {
                replica,
                gateway_generations,
                sealed_keys,
            }),
        }
    }
}

impl AdminView {
    /// The replica's config (read once at start; never changed).
    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    /// Now, on the replica's clock.
    pub fn now(&self) -> Timestamp {
        self.shared.now()
    }

    /// The replica's role.
    pub fn role(&self) -> PageRole {
        match self.shared.role.current() {
            Some(ReplicaRole::Serving) => PageRole::Serving,
            Some(ReplicaRole::Standby) => PageRole::StandingBy,
            None => PageRole::Waiting,
        }
    }

    /// Copies of the state, taken now.
    pub fn snapshot(&self) -> Snapshot<'_> {
        let shared = &self.shared;
        Snapshot {
            view: self,
            now: shared.now(),
            role: self.role(),
            catalogs: shared.catalogs.snapshot(),
            unread: shared.catalogs.unread_errors(),
            quotes: shared.quotes.snapshot(),
            seen: shared.inventory.seen(),
            guard_incomplete: shared.inventory.unlisted(),
        }
    }
}
