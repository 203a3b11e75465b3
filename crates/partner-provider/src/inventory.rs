//! The inventory pass: the complete list of the partner's instances, open sites and pool
//! addresses, read from every keyed cloud by its owned tags, or nothing at all when any
//! cloud cannot be listed (a partial list would make the zone declare nodes lost).
//!
//! One pass, on the serving replica only (a standby reads no cloud and sends nothing):
//!
//! 1. per keyed cloud, one paginated listing of instances per owned tag (the owner tag and
//!    every also-owned tag), adopting only instances with this partner's child tag, then one
//!    listing of each kind of site resource the cloud has (its networks and each kind of
//!    address, `crate::clouds::CloudOps::addresses`), kept when their marks carry the child tag and an owned
//!    tag ([`crate::naming::ResourceMarks`]);
//! 2. with `ptr_domain`, the reverse DNS names the listings did not carry are read;
//! 3. the site guard ([`guard`]) learns where each site name is live and feeds the quote
//!    state;
//! 4. with `ptr_domain`, reverse DNS (`rdns`) is compared and set where it differs;
//! 5. the report: every instance (tenant nodes and gateways), every open site with its
//!    stable IPv4 and private prefix, every pool address whose pool is known.
//!
//! Invariants: an instance or resource without this partner's child tag and an owned tag is
//! never reported, counted or changed; a pass that could not list everything sends no
//! inventory and leaves the guard's live sites as they were (and "site guard incomplete"
//! stands while a cloud's addresses could not be listed).

pub mod guard;
pub(crate) mod rdns;

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};

use orc_cloud::CloudError;
use orc_partner::admin::{
    AddressKind, CloudSeen, InventorySeen, SeenAddress, SeenInstance, SeenNetwork,
};
use orc_partner::ids::{Cloud, NodeId, PoolPath, SiteName, Timestamp};
use orc_proto as proto;

pub(crate) use crate::clouds::Held;
use crate::instances::{self, Owned, Ownership};
use crate::naming::{self, OWNER_KEY, Prefix, ResourceKind, ResourceMarks};
use crate::provider::{PartnerProvider, Shared};
use crate::quote_book::KnownSites;
use crate::sync::lock;

/// What the inventory pass remembers from one pass to the next (held in the provider's
/// shared state): which remapped live sites the guard has logged, which addresses' reverse
/// DNS is still to be set, and which clouds' addresses could not be listed last pass; and,
/// for the admin page, what each cloud's last complete listing found ([`InventorySeen`]).
#[derive(Debug, Default)]
pub(crate) struct InventoryState {
    memory: Mutex<PassMemory>,
    /// Replaced whole by each pass; readers take the `Arc` and never hold the lock.
    seen: Mutex<Arc<InventorySeen>>,
}

/// The contents of [`InventoryState`], behind its lock; the pass and its guard and reverse
/// DNS steps read and change it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(in crate::inventory) struct PassMemory {
    /// Live sites the map now puts elsewhere, already logged (site → the logged mismatch).
    pub(in crate::inventory) guard_logged: BTreeMap<SiteName, String>,
    /// Addresses whose reverse DNS could not be set last pass (address → wanted name).
    pub(in crate::inventory) rdns_retry: BTreeMap<Ipv4Addr, String>,
    /// Clouds the last pass could not list (instances or site resources), so their
    /// addresses are unknown to the guard.
    pub(in crate::inventory) unlisted_addresses: BTreeSet<Cloud>,
}

impl InventoryState {
    /// Runs one step over the pass memory (never across I/O).
    pub(in crate::inventory) fn with<T>(&self, step: impl FnOnce(&mut PassMemory) -> T) -> T {
        step(&mut lock(&self.memory))
    }

    /// What the passes saw so far (a shared copy: later passes do not change it).
    pub(crate) fn seen(&self) -> Arc<InventorySeen> {
        lock(&self.seen).clone()
    }

    /// The clouds whose addresses the last pass could not list.
    pub(crate) fn unlisted(&self) -> BTreeSet<Cloud> {
        lock(&self.memory).unlisted_addresses.clone()
    }

    /// Sets the clouds whose addresses the last pass could not list (tests).
    #[cfg(feature = "testing")]
    pub(crate) fn set_unlisted(&self, clouds: BTreeSet<Cloud>) {
        lock(&self.memory).unlisted_addresses = clouds;
    }

    /// Records what one pass saw.
    pub(crate) fn record(&self, change: impl FnOnce(&mut InventorySeen)) {
        let mut seen = lock(&self.seen);
        change(Arc::make_mut(&mut seen));
    }
}

/// A site's stable IPv4 or a pool's address, as read back from its cloud.
#[derive(Debug, Clone)]
pub struct SiteAddress {
    pub(crate) cloud: Cloud,
    pub(crate) kind: ResourceKind,
    pub(crate) site: String,
    pub(crate) ipv4: Ipv4Addr,
    /// The cloud location holding the address.
    pub(crate) location: String,
    /// A stable address of a closed site (kept for a returning site).
    pub(crate) closed: bool,
    /// The pool id (`<org>/<project>/<name>`) of a pool address, when it can be read back.
    pub(crate) pool: Option<String>,
    /// The pool mark of a pool address ([`naming::pool_label`]).
    pub(crate) pool_mark: Option<String>,
    /// `<cloud>:<address id>`.
    pub(crate) id: String,
    /// The instance holding the address, `<cloud>:<instance id>`.
    pub(crate) attached_to: Option<String>,
    /// The reverse DNS name the cloud reports; `None` when not read (a cloud that reports
    /// it per holding instance reads it only when `ptr_domain` is set, and an address that
    /// no instance holds has none).
    pub(crate) ptr: Option<String>,
}

/// A site's private network.
#[derive(Debug, Clone)]
pub(crate) struct SiteNetwork {
    pub(crate) cloud: Cloud,
    pub(crate) site: String,
    pub(crate) prefix: Prefix,
}

/// Everything one pass read from the clouds.
#[derive(Debug, Clone, Default)]
pub(crate) struct Listing {
    pub(crate) held: Vec<Held>,
    pub(crate) addresses: Vec<SiteAddress>,
    pub(crate) networks: Vec<SiteNetwork>,
}

impl PartnerProvider {
    /// Every instance the partner holds, or `None` when any cloud cannot be listed: one
    /// paginated listing per cloud per owned tag.
    pub async fn list_everything(&self) -> Option<Vec<Owned>> {
        let mut all: BTreeMap<String, Owned> = BTreeMap::new();
        for cloud in self.shared.clients.keyed() {
            let Some(ownership) = self.shared.ownership.get(&cloud) else {
                continue;
            };
            match list_instances(&self.shared, cloud, ownership).await {
                Ok(held) => {
                    for h in held {
                        all.insert(h.owned.instance_ref.clone(), h.owned);
                    }
                }
                Err(e) => {
                    log_unreadable(cloud, &e);
                    return None;
                }
            }
        }
        Some(all.into_values().collect())
    }

    /// Whether the site guard lacks a cloud's addresses ("site guard incomplete"): the last
    /// pass could not list at least one keyed cloud (its instances or its addresses), so a
    /// live site may be missed. Clears with the next complete pass.
    pub fn site_guard_incomplete(&self) -> bool {
        !self
            .shared
            .inventory
            .with(|m| m.unlisted_addresses.is_empty())
    }

    /// Live sites out of step with the region map (remapped while live, or live at a
    /// location no site name maps to), from what the last complete pass found.
    pub fn sites_out_of_step(&self) -> Vec<guard::OutOfStep> {
        let state = self.shared.quotes.snapshot();
        guard::out_of_step(&self.shared.config, state.live_sites())
    }

    /// Addresses whose reverse DNS the last pass could not set, with the wanted names.
    pub fn reverse_dns_pending(&self) -> BTreeMap<Ipv4Addr, String> {
        self.shared.inventory.with(|m| m.rdns_retry.clone())
    }

    /// Whether this replica was told to stand by.
    fn standing_by(&self) -> bool {
        self.shared.role.is_standing_by()
    }

    /// One inventory pass (the body of `Provider::inventory`).
    pub(crate) async fn report_inventory(&self) -> Option<proto::Inventory> {
        if self.standing_by() {
            tracing::debug!("standing by: no cloud is listed and no inventory is sent");
            // A later serving period logs each remapped site afresh.
            self.shared.inventory.with(|m| m.guard_logged.clear());
            return None;
        }
        self.become_serving();
        let shared = &self.shared;
        let at = shared.now();
        let pass = list_all(shared).await;
        shared.inventory.record(|seen| {
            seen.last_pass = Some(at);
            for (cloud, listing) in &pass.listed {
                seen.listed(*cloud, seen_of(listing, at));
            }
            if let Some((cloud, error)) = &pass.failed {
                seen.failed(*cloud, at, error.to_string());
            }
        });
        if let Some((cloud, error)) = pass.failed {
            shared
                .inventory
                .with(|m| m.unlisted_addresses.insert(cloud));
            log_unreadable(cloud, &error);
            return None;
        }
        shared.inventory.with(|m| m.unlisted_addresses.clear());
        let mut listing = Listing::default();
        for (_, one) in pass.listed {
            listing.held.extend(one.held);
            listing.addresses.extend(one.addresses);
            listing.networks.extend(one.networks);
        }
        let domain = shared.config.ptr_domain.as_ref().map(|d| d.as_str());
        // The names are read before the guard runs: a stable address's name tells where its
        // site is live.
        let unread = match domain {
            Some(_) => rdns::read_names(&shared.clients, &mut listing.addresses).await,
            None => BTreeMap::new(),
        };
        guard::update(&shared.config, &shared.quotes, &shared.inventory, &listing);
        if let Some(domain) = domain {
            rdns::converge(
                &shared.clients,
                &shared.inventory,
                domain,
                &listing.addresses,
                &unread,
            )
            .await;
        }
        Some(build_report(&shared.known, &listing))
    }
}

fn log_unreadable(cloud: Cloud, error: &CloudError) {
    tracing::warn!(%cloud, "One cloud's inventory could not be read; no inventory is sent this pass, so no node is declared lost");
    tracing::debug!(%cloud, error = %error, "the cloud's answer");
}

/// What one pass read: the listing of each cloud read in full, in cloud order, and the
/// cloud that could not be listed, which ended the pass.
struct PassListing {
    listed: Vec<(Cloud, Listing)>,
    failed: Option<(Cloud, CloudError)>,
}

/// Reads every keyed cloud; the first cloud that cannot be listed ends the pass.
async fn list_all(shared: &Shared) -> PassListing {
    let mut listed = Vec::new();
    for cloud in shared.clients.keyed() {
        let Some(ownership) = shared.ownership.get(&cloud) else {
            continue;
        };
        let mut one = Listing::default();
        let read = async {
            one.held = list_instances(shared, cloud, ownership).await?;
            list_site_resources(shared, cloud, ownership, &mut one).await
        };
        if let Err(error) = read.await {
            return PassListing {
                listed,
                failed: Some((cloud, error)),
            };
        }
        listed.push((cloud, one));
    }
    PassListing {
        listed,
        failed: None,
    }
}

/// The words for an instance's state on the admin page.
fn state_words(state: proto::InstanceState) -> &'static str {
    match state {
        proto::InstanceState::Provisioning => "provisioning",
        proto::InstanceState::Running => "running",
        proto::InstanceState::Stopped => "stopped",
        proto::InstanceState::Deleting => "deleting",
    }
}

/// What the admin page keeps of one cloud's listing.
fn seen_of(listing: &Listing, at: Timestamp) -> CloudSeen {
    CloudSeen {
        listed_at: at,
        instances: listing
            .held
            .iter()
            .map(|held| {
                let marks = &held.owned.marks;
                SeenInstance {
                    node_id: marks.node_id.clone(),
                    instance_ref: held.owned.instance_ref.clone(),
                    site: marks.site.clone(),
                    location: held.location.clone(),
                    purpose: marks.purpose,
                    state: state_words(held.owned.state).to_string(),
                    pool: marks.pool.as_deref().and_then(naming::pool_from_label),
                    gateway_generation: marks.gateway_gen.clone(),
                    usd_monthly: marks.usd_monthly(),
                }
            })
            .collect(),
        addresses: listing
            .addresses
            .iter()
            .filter_map(|a| {
                let kind = match a.kind {
                    ResourceKind::Stable => AddressKind::Stable,
                    ResourceKind::PoolAddress => AddressKind::Pool,
                    ResourceKind::Network | ResourceKind::SealedKey | ResourceKind::Disk => {
                        return None;
                    }
                };
                Some(SeenAddress {
                    kind,
                    site: a.site.clone(),
                    location: a.location.clone(),
                    ipv4: a.ipv4,
                    pool: a.pool.clone(),
                    attached_to: a.attached_to.clone(),
                    closed: a.closed,
                })
            })
            .collect(),
        networks: listing
            .networks
            .iter()
            .map(|n| SeenNetwork {
                site: n.site.clone(),
                prefix: n.prefix.to_string(),
            })
            .collect(),
    }
}

/// The partner's instances in `cloud`: one paginated listing per owned tag, each instance
/// once.
async fn list_instances(
    shared: &Shared,
    cloud: Cloud,
    ownership: &Ownership,
) -> Result<Vec<Held>, CloudError> {
    let mut found: BTreeMap<String, Held> = BTreeMap::new();
    for tag in &ownership.tags {
        for held in
            instances::list_held(&shared.clients, cloud, (OWNER_KEY, tag), ownership).await?
        {
            found.insert(held.owned.instance_ref.clone(), held);
        }
    }
    Ok(found.into_values().collect())
}

/// The pool id of a pool address: the raw id recorded beside the marks (a description
/// `pool <pool id>`) when there is one, else the id the pool mark spells.
fn pool_of(raw: Option<&str>, marks: &ResourceMarks) -> Option<String> {
    raw.and_then(|d| d.trim().strip_prefix("pool "))
        .map(str::trim)
        .filter(|r| r.split('/').count() == 3 && r.split('/').all(|part| !part.is_empty()))
        .map(str::to_string)
        .or_else(|| marks.pool.as_deref().and_then(naming::pool_from_label))
}

/// The site networks, stable addresses and pool addresses of `cloud`: one listing of each
/// kind of resource the cloud has, filtered by ownership.
async fn list_site_resources(
    shared: &Shared,
    cloud: Cloud,
    ownership: &Ownership,
    listing: &mut Listing,
) -> Result<(), CloudError> {
    let Some(ops) = shared.clients.get(cloud) else {
        return Ok(());
    };
    for network in ops.networks(ownership).await? {
        listing.networks.push(SiteNetwork {
            cloud,
            site: network.site,
            prefix: network.prefix,
        });
    }
    let kinds = [ResourceKind::Stable, ResourceKind::PoolAddress];
    for found in ops.addresses(ownership, &kinds, None).await? {
        let Ok(ipv4) = found.ip.parse::<Ipv4Addr>() else {
            continue;
        };
        let kind = found.marks.kind;
        let pool = match kind {
            ResourceKind::PoolAddress => pool_of(found.description.as_deref(), &found.marks),
            ResourceKind::Stable
            | ResourceKind::Network
            | ResourceKind::SealedKey
            | ResourceKind::Disk => None,
        };
        listing.addresses.push(SiteAddress {
            cloud,
            kind,
            site: found.site,
            ipv4,
            location: found.location,
            closed: kind == ResourceKind::Stable && found.marks.closed_at.is_some(),
            pool,
            pool_mark: match kind {
                ResourceKind::PoolAddress => found.marks.pool.clone(),
                ResourceKind::Stable
                | ResourceKind::Network
                | ResourceKind::SealedKey
                | ResourceKind::Disk => None,
            },
            id: found.id,
            attached_to: found.attached_to,
            ptr: found.ptr,
        });
    }
    Ok(())
}

/// The report sent to the zone, and the replica's memory of where each node runs.
fn build_report(known_sites: &KnownSites, listing: &Listing) -> proto::Inventory {
    let mut nodes = Vec::new();
    let mut known = BTreeMap::new();
    // site → the clouds its nodes run in
    let mut node_sites: BTreeMap<String, BTreeSet<Cloud>> = BTreeMap::new();
    for held in &listing.held {
        let owned = &held.owned;
        node_sites
            .entry(owned.marks.site.clone())
            .or_default()
            .insert(owned.cloud);
        let (Ok(node_id), Ok(site), Ok(instance_ref)) = (
            NodeId::new(owned.marks.node_id.as_str()),
            SiteName::new(owned.marks.site.as_str()),
            proto::InstanceRef::new(owned.instance_ref.as_str()),
        ) else {
            continue;
        };
        known.insert(owned.marks.node_id.clone(), site.clone());
        nodes.push(proto::InventoryNode {
            node_id,
            site,
            instance_ref,
            state: owned.state,
        });
    }
    known_sites.replace(known);
    nodes.sort_by(|a, b| a.node_id.as_str().cmp(b.node_id.as_str()));

    let mut open: BTreeSet<String> = node_sites.keys().cloned().collect();
    for address in &listing.addresses {
        if address.kind == ResourceKind::Stable && !address.closed {
            open.insert(address.site.clone());
        }
    }
    let sites = open
        .into_iter()
        .filter_map(|name| {
            let clouds = node_sites.get(&name);
            let prefer = |cloud: Cloud| clouds.is_none_or(|c| c.contains(&cloud));
            let stable = pick(
                listing
                    .addresses
                    .iter()
                    .filter(|a| a.kind == ResourceKind::Stable && a.site == name),
                |a| (prefer(a.cloud), !a.closed),
            )
            .map(|a| a.ipv4);
            let prefix = pick(listing.networks.iter().filter(|n| n.site == name), |n| {
                (prefer(n.cloud), true)
            })
            .map(|n| n.prefix.to_string());
            Some(proto::InventorySite {
                site: SiteName::new(name).ok()?,
                public_ipv4: stable,
                private_prefix: prefix,
            })
        })
        .collect();

    let mut pool_addresses: Vec<proto::PoolAddress> = listing
        .addresses
        .iter()
        .filter(|a| a.kind == ResourceKind::PoolAddress)
        .filter_map(|a| {
            Some(proto::PoolAddress {
                pool: PoolPath::new(a.pool.as_deref()?).ok()?,
                site: SiteName::new(a.site.as_str()).ok()?,
                ipv4: a.ipv4,
            })
        })
        .collect();
    pool_addresses.sort_by(|a, b| {
        (a.pool.as_str(), a.site.as_str(), a.ipv4).cmp(&(b.pool.as_str(), b.site.as_str(), b.ipv4))
    });
    proto::Inventory {
        nodes,
        sites,
        pool_addresses,
    }
}

/// The first item with the best key (`true` beats `false`).
fn pick<'a, T>(
    items: impl Iterator<Item = &'a T>,
    key: impl Fn(&T) -> (bool, bool),
) -> Option<&'a T> {
    let mut best: Option<(&T, (bool, bool))> = None;
    for item in items {
        let k = key(item);
        if best.is_none_or(|(_, b)| k > b) {
            best = Some((item, k));
        }
    }
    best.map(|(item, _)| item)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_ids_come_from_the_raw_id_or_the_mark() {
        let mut marks = ResourceMarks::new("t", "zone-1", ResourceKind::PoolAddress);
        marks.pool = Some(naming::pool_label("acme/web/api"));
        assert_eq!(pool_of(None, &marks).as_deref(), Some("acme/web/api"));
        assert_eq!(
            pool_of(Some("pool acme/web.v2/api"), &marks).as_deref(),
            Some("acme/web.v2/api")
        );
        assert_eq!(
            pool_of(Some("acme/web.v2/api"), &marks).as_deref(),
            Some("acme/web/api")
        );
        marks.pool = Some(naming::pool_label("acme/web.v2/api"));
        assert_eq!(pool_of(None, &marks), None);
    }

    #[test]
    fn pick_prefers_the_best_key_then_the_first() {
        let items = [
            (1, false, true),
            (2, true, false),
            (3, true, true),
            (4, true, true),
        ];
        let best = pick(items.iter(), |i| (i.1, i.2)).unwrap();
        assert_eq!(best.0, 3);
        assert!(pick(std::iter::empty::<&(u8, bool, bool)>(), |_| (true, true)).is_none());
    }
}
