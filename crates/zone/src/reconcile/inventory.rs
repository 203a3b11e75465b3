//! Complete inventory reports: a node the zone believes running that the provider's
//! complete report does not list is `lost`; a lost node a later report lists again is
//! `running` again (and billed for the whole time: it ran all along).
//!
//! Only complete reports exist (the protocol has no partial ones), so absence is evidence.
//! A node that turned running within the grace period is spared: the provider may have read
//! its inventory before that node's deploy finished. A lost node stops accruing usage (its
//! usage is written up to the moment it is found missing).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use orc_proto::Inventory;

use ipnet::Ipv4Net;

use crate::model::{EventScope, Expected, Name, NodeState, Provider, ProviderId, Timestamp};
use crate::store::{PoolAddress, ProviderSite, StatusWrite, Store, StoreError, StoreResult};

/// Words of the event when a lost node is reported again.
pub const FOUND_WORDS: &str = "The node is reported by its provider again.";

/// Words a tenant reads on a lost node.
pub const LOST_WORDS: &str = "The node is no longer reported by its provider.";

/// What one complete report changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Inventoried {
    /// Nodes marked lost.
    pub lost: usize,
    /// A site, its stable address or prefix, or a pool address changed: the mesh plans
    /// from them.
    pub mesh_changed: bool,
}

/// Marks as lost every running node of `provider` missing from `inventory` (and not changed
/// within `grace`), brings back lost nodes it lists again, and records its sites and pool
/// addresses.
pub async fn apply_inventory(
    store: &Store,
    provider: &Provider,
    inventory: &Inventory,
    now: Timestamp,
    grace: Duration,
) -> StoreResult<Inventoried> {
    let reported: BTreeSet<&str> = inventory.nodes.iter().map(|n| n.node_id.as_str()).collect();
    let grace = i64::try_from(grace.as_millis()).unwrap_or(i64::MAX);
    let running = store
        .nodes_of_provider_in(&provider.id, &[NodeState::Running])
        .await?;
    let mut writes = Vec::new();
    let mut missing = Vec::new();
    for node in running {
        if reported.contains(node.id.as_str()) || node.updated_at.plus_millis(grace) > now {
            continue;
        }
        let mut status = node.status.clone();
        status.state = NodeState::Lost;
        status.state_words = Some(LOST_WORDS.to_string());
        status.lost_at = Some(now);
        // Due at once: the node plan then waits out the replacement delay.
        status.next_attempt_at = Some(now);
        writes.push(StatusWrite {
            id: node.id.clone(),
            expected: Expected::Version(node.version),
            status,
        });
        missing.push(node);
    }
    let found = restore_found(store, provider, &reported, now).await?;
    let addresses_changed = record_pool_addresses(store, provider, inventory, now).await? > 0;
    let sites: Vec<ProviderSite> = inventory
        .sites
        .iter()
        .map(|s| ProviderSite {
            site: s.site.to_string(),
            public_ipv4: s.public_ipv4.map(|a| a.to_string()),
            private_prefix: s.private_prefix.clone(),
            updated_at: now,
        })
        .collect();
    let sites = screen_sites(store, provider, sites, now).await?;
    let sites_changed = store.replace_provider_sites(&provider.id, &sites).await?;
    let mut outcome = Inventoried {
        lost: 0,
        mesh_changed: found > 0 || addresses_changed || sites_changed,
    };
    if writes.is_empty() {
        return Ok(outcome);
    }
    let written = store.update_node_states(&writes, now).await?;
    for node in &written.updated {
        tracing::warn!(node = %node.id, provider = %provider.name, "node missing from a complete inventory; marked lost");
        let scope = EventScope {
            provider_id: Some(provider.id.clone()),
            pool_id: Some(node.pool_id.clone()),
            node_id: Some(node.id.clone()),
            ..EventScope::default()
        };
        store
            .record_event(&scope, "node.lost", LOST_WORDS, now)
            .await?;
    }
    let marked: BTreeSet<_> = written.updated.iter().map(|n| n.id.clone()).collect();
    for node in missing.into_iter().filter(|n| marked.contains(&n.id)) {
        if let Some(subject) = super::billing_subject_for(store, &node).await? {
            super::accrue_usage(store, &subject, now).await?;
        }
    }
    outcome.lost = marked.len();
    outcome.mesh_changed |= outcome.lost > 0;
    Ok(outcome)
}

/// The reported sites the zone records: of a provider that runs site gateways, every site
/// except those whose prefix overlaps a site another such provider holds (the older
/// provider, by id, keeps its prefix: a report never moves another provider's peers or
/// routes). What is left out is said in one `provider.sites_refused` event, counted as a
/// repeat while the next reports say the same.
async fn screen_sites(
    store: &Store,
    provider: &Provider,
    sites: Vec<ProviderSite>,
    now: Timestamp,
) -> StoreResult<Vec<ProviderSite>> {
    if !provider.may_run_site_gateways() {
        // Its sites never enter the mesh (see `crate::mesh`): nothing to guard.
        return Ok(sites);
    }
    let gateways: BTreeSet<ProviderId> = store
        .list_providers()
        .await?
        .into_iter()
        .filter(|p| p.id != provider.id && p.may_run_site_gateways())
        .map(|p| p.id)
        .collect();
    let held: Vec<(ProviderId, Ipv4Net)> = store
        .mesh_sites()
        .await?
        .into_iter()
        .filter(|s| gateways.contains(&s.provider_id) && s.provider_id < provider.id)
        .filter_map(|s| Some((s.provider_id, s.private_prefix?.parse().ok()?)))
        .collect();
    let (kept, refused): (Vec<ProviderSite>, Vec<ProviderSite>) =
        sites.into_iter().partition(|site| {
            let Some(prefix) = site
                .private_prefix
                .as_deref()
                .and_then(|p| p.parse::<Ipv4Net>().ok())
            else {
                return true;
            };
            !held.iter().any(|(_, other)| {
                other.contains(&prefix.network()) || prefix.contains(&other.network())
            })
        });
    if !refused.is_empty() {
        let names: Vec<String> = refused
            .iter()
            .map(|s| {
                format!(
                    "{} ({})",
                    s.site,
                    s.private_prefix.as_deref().unwrap_or_default()
                )
            })
            .collect();
        tracing::warn!(provider = %provider.name, id = %provider.id, sites = ?names, "sites left out: their prefixes overlap sites of another provider");
        let scope = EventScope::of_provider(provider);
        let words = format!(
            "Sites of provider {} are left out of the mesh: their prefixes overlap sites of \
             another provider: {}.",
            provider.name,
            names.join(", ")
        );
        store
            .record_repeatable_event(&scope, "provider.sites_refused", &words, now)
            .await?;
    }
    Ok(kept)
}

/// Lost nodes of `provider` that the report lists again turn `running` again.
async fn restore_found(
    store: &Store,
    provider: &Provider,
    reported: &BTreeSet<&str>,
    now: Timestamp,
) -> StoreResult<usize> {
    let lost = store
        .nodes_of_provider_in(&provider.id, &[NodeState::Lost])
        .await?;
    let writes: Vec<StatusWrite> = lost
        .into_iter()
        .filter(|node| reported.contains(node.id.as_str()))
        .map(|node| {
            let mut status = node.status.clone();
            status.state = NodeState::Running;
            status.state_words = None;
            status.lost_at = None;
            status.next_attempt_at = Some(now);
            StatusWrite {
                id: node.id,
                expected: Expected::Version(node.version),
                status,
            }
        })
        .collect();
    if writes.is_empty() {
        return Ok(0);
    }
    let written = store.update_node_states(&writes, now).await?;
    for node in &written.updated {
        tracing::info!(node = %node.id, provider = %provider.name, "lost node reported again; running");
        let scope = EventScope {
            provider_id: Some(provider.id.clone()),
            pool_id: Some(node.pool_id.clone()),
            node_id: Some(node.id.clone()),
            ..EventScope::default()
        };
        store
            .record_event(&scope, "node.found", FOUND_WORDS, now)
            .await?;
    }
    Ok(written.updated.len())
}

/// Records the public pools' addresses the report lists (replacing what the provider
/// reported before). An address of a pool that is unknown or on another provider is
/// ignored.
async fn record_pool_addresses(
    store: &Store,
    provider: &Provider,
    inventory: &Inventory,
    now: Timestamp,
) -> StoreResult<usize> {
    let mut addresses = BTreeMap::new();
    for reported in &inventory.pool_addresses {
        let path: Vec<&str> = reported.pool.as_str().split('/').collect();
        let [org, project, pool] = path.as_slice() else {
            tracing::debug!(pool = %reported.pool, "pool address of a pool path that is not org/project/name");
            continue;
        };
        let (Ok(org), Ok(project), Ok(pool)) = (
            org.parse::<Name>(),
            project.parse::<Name>(),
            pool.parse::<Name>(),
        ) else {
            continue;
        };
        match store.pool_by_path(&org, &project, &pool).await {
            Ok(pool) if pool.spec.provider_id == provider.id => {
                addresses.insert(
                    pool.id,
                    PoolAddress {
                        site: reported.site.to_string(),
                        ipv4: reported.ipv4.to_string(),
                    },
                );
            }
            Ok(_) | Err(StoreError::NotFound { .. }) => {
                tracing::debug!(pool = %reported.pool, provider = %provider.name, "pool address of a pool this provider does not serve");
            }
            Err(e) => return Err(e),
        }
    }
    store
        .replace_pool_addresses(&provider.id, &addresses, now)
        .await
}
