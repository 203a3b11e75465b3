//! Sites in the clouds: a site's private network, its stable public IPv4 and the sealed SSH
//! key of each cloud account, found by their marks ([`crate::naming::ResourceMarks`]) and
//! created when missing.
//!
//! Opening a site (on its first placement, tenant node or gateway alike) makes sure of:
//! - its private network with a /24 prefix unique in the zone ([`Prefix`], chosen as the
//!   lowest one no network of this partner holds in any keyed cloud, recorded on the
//!   network). Where the cloud has a route table the network carries the route `0.0.0.0/0`
//!   via the gateway's fixed private address (`.254`); where it has none, each node's first
//!   boot points its default route at `.254` ([`NetworkBoot`]) and the gateway claims `.254`
//!   itself (`crate::clouds::CloudOps::node_default_via`,
//!   `crate::clouds::CloudOps::gateway_claims_address`);
//! - its stable public IPv4, never auto-deleted. A returning site takes its kept address
//!   back (the close time is removed).
//!
//! Each cloud's own resources for these are its `crate::clouds` module's.
//!
//! Invariants: every step looks before it creates, so repeating a step or retrying after a
//! failure makes no second resource; site openings are serialised in this process (only the
//! serving replica opens sites), which keeps prefixes unique; what was learnt is cached so a
//! deploy into an open site costs no site request. A closed site's stable IPv4 is released
//! only after [`STABLE_KEEP`] and only while the site holds no node.
//!
//! Request costs (cold cache): opening a site is one network listing per keyed cloud, one
//! network create, one address listing and one address create; the sealed key is one
//! listing and one create, once per cloud and process.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::sync::Mutex;

use orc_cloud::CloudError;
use orc_common::FaultClass;
use orc_common::Purpose;
use orc_partner::ids::{Cloud, Timestamp};

use crate::clouds::{AddressFound, CloudOps, Waits, parse_v4};
use crate::instances::{self, Ownership};
use crate::naming::{
    self, Prefix, ResourceKind, ResourceMarks, STABLE_KEEP, sealed_key_name, sealed_public_key,
};
use crate::provider::PartnerProvider;
use crate::sync::lock;

/// A site's stable public IPv4.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StableAddress {
    /// `hetzner:<primary IP id>` or `vultr:<reserved IP id>`.
    pub id: String,
    pub ip: Ipv4Addr,
    /// When the site closed; `None` while it is open.
    pub closed_at: Option<Timestamp>,
}

/// An open site as the clouds hold it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenSite {
    pub cloud: Cloud,
    pub site: String,
    /// The cloud's id of the private network.
    pub network: String,
    pub prefix: Prefix,
    pub stable: StableAddress,
    /// Where a tenant node's default route points (`CloudOps::node_default_via`).
    pub default_via: Ipv4Addr,
}

/// What a node's first boot needs to reach the world through its site gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetworkBoot {
    pub prefix: Prefix,
    /// Where the node's default route points: the cloud's router (where it routes
    /// `0.0.0.0/0` to the gateway), or else the gateway itself.
    pub default_via: Ipv4Addr,
}

impl OpenSite {
    /// The first-boot network settings of a tenant node in this site.
    pub fn node_boot(&self) -> NetworkBoot {
        NetworkBoot {
            prefix: self.prefix,
            default_via: self.default_via,
        }
    }
}

/// What this process knows of sites and sealed keys, and the lock that serialises openings.
#[derive(Debug, Default)]
pub(crate) struct SiteCache {
    open: Mutex<BTreeMap<String, OpenSite>>,
    sealed: Mutex<BTreeMap<Cloud, String>>,
    opening: tokio::sync::Mutex<()>,
    /// Serialises the pool address steps (find, create, attach, release) in this process.
    addressing: tokio::sync::Mutex<()>,
}

impl SiteCache {
    /// Holds off every other pool address step of this process while held.
    pub(crate) async fn addressing(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.addressing.lock().await
    }

    /// Forgets everything (on standing by: another replica may change the sites).
    pub(crate) fn clear(&self) {
        lock(&self.open).clear();
        lock(&self.sealed).clear();
    }

    pub(crate) fn get(&self, site: &str) -> Option<OpenSite> {
        lock(&self.open).get(site).cloned()
    }

    fn put(&self, open: OpenSite) {
        lock(&self.open).insert(open.site.clone(), open);
    }

    fn forget(&self, site: &str) {
        lock(&self.open).remove(site);
    }
}

/// Why a site could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum SiteError {
    #[error("the cloud refused a site step")]
    Cloud(#[from] CloudError),
    #[error("the {0} cloud has no key")]
    NoClient(Cloud),
    #[error("every private prefix of 10.128.0.0/10 is taken")]
    NoPrefix,
    #[error("the cloud answered an address that is not IPv4: {0:?}")]
    BadAddress(String),
    #[error("the cloud does not list location {0:?}")]
    UnknownLocation(String),
}

/// Whether a create lost a unique-name race (the name is taken for good).
pub(crate) fn is_uniqueness(error: &CloudError) -> bool {
    error.class() == FaultClass::Conflict
}

/// A network of this partner: its site and prefix, with its cloud id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteNetwork {
    pub cloud: Cloud,
    pub id: String,
    pub site: String,
    pub prefix: Prefix,
    /// Whether the route `0.0.0.0/0` via the gateway is on it (or the cloud needs none).
    pub routed: bool,
}

/// Everything of the partner's site resources in one cloud.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SiteResources {
    pub networks: Vec<SiteNetwork>,
    /// Stable IPv4s by site.
    pub stable: BTreeMap<String, StableAddress>,
    /// Pool addresses: (pool mark, site, address id, address, attached instance ref).
    pub pool_addresses: Vec<PoolAddressHeld>,
    /// Sealed SSH keys (their cloud ids).
    pub sealed_keys: Vec<String>,
}

/// A pool address the partner holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolAddressHeld {
    /// The pool mark ([`naming::pool_label`]).
    pub pool_mark: String,
    /// The pool id, when it can be read back.
    pub pool: Option<String>,
    pub site: String,
    /// `<cloud>:<address id>`.
    pub id: String,
    pub ip: Ipv4Addr,
    /// The instance it is attached to (`<cloud>:<instance id>`).
    pub attached_to: Option<String>,
}

impl PartnerProvider {
    /// The account of `cloud`, or why there is none.
    pub(crate) fn cloud_ops(&self, cloud: Cloud) -> Result<&dyn CloudOps, SiteError> {
        self.shared
            .clients
            .get(cloud)
            .ok_or(SiteError::NoClient(cloud))
    }

    /// How long steps wait for the clouds' actions.
    pub(crate) fn waits(&self) -> Waits {
        Waits {
            poll: self.shared.options.poll_interval,
            deadline: self.shared.options.deploy_deadline,
        }
    }

    fn ownership_of(&self, cloud: Cloud) -> Option<&Ownership> {
        self.shared.ownership.get(&cloud)
    }

    /// Marks of `kind` for the current owner tag of `cloud`.
    pub(crate) fn resource_marks(&self, cloud: Cloud, kind: ResourceKind) -> Option<ResourceMarks> {
        let ownership = self.ownership_of(cloud)?;
        let owner = ownership.tags.first()?;
        Some(ResourceMarks::new(owner, &ownership.child, kind))
    }

    /// Every site resource of this partner in `cloud`: what a retired cloud leaves behind
    /// for the operator to delete by hand (the partner never deletes networks or sealed
    /// keys, nor a stable address before its keep is over). One listing of networks,
    /// stable addresses, pool addresses and SSH keys each.
    pub async fn site_resources(&self, cloud: Cloud) -> Result<SiteResources, SiteError> {
        let Some(ownership) = self.ownership_of(cloud) else {
            return Ok(SiteResources::default());
        };
        let networks = self.networks_of(cloud).await?;
        let stable = self.stable_addresses(cloud).await?;
        let pool_addresses = self.pool_addresses(cloud).await?;
        let sealed_keys = self.cloud_ops(cloud)?.sealed_keys(ownership).await?;
        Ok(SiteResources {
            networks,
            stable,
            pool_addresses,
            sealed_keys,
        })
    }

    /// What a retired cloud (`<cloud>_enabled=false`) leaves behind: its site resources,
    /// listed and never deleted. `None` while the cloud is not retired.
    pub async fn left_behind(&self, cloud: Cloud) -> Result<Option<SiteResources>, SiteError> {
        let retired = self
            .shared
            .config
            .cloud(cloud)
            .is_some_and(|c| c.is_keyed() && !c.enabled);
        if !retired {
            return Ok(None);
        }
        self.site_resources(cloud).await.map(Some)
    }

    /// The partner's stable addresses in `cloud`, of `site` when given: one listing.
    async fn stable_found(
        &self,
        cloud: Cloud,
        site: Option<&str>,
    ) -> Result<Vec<(String, StableAddress)>, SiteError> {
        let (Some(ownership), Some(ops)) =
            (self.ownership_of(cloud), self.shared.clients.get(cloud))
        else {
            return Ok(Vec::new());
        };
        let found = ops
            .addresses(ownership, &[ResourceKind::Stable], site)
            .await?;
        found
            .into_iter()
            .map(|a: AddressFound| {
                Ok((
                    a.site,
                    StableAddress {
                        ip: parse_v4(&a.ip)?,
                        id: a.id,
                        closed_at: a.marks.closed_at,
                    },
                ))
            })
            .collect()
    }

    /// The stable IPv4s of this partner in `cloud`, by site: one listing.
    pub async fn stable_addresses(
        &self,
        cloud: Cloud,
    ) -> Result<BTreeMap<String, StableAddress>, SiteError> {
        Ok(self.stable_found(cloud, None).await?.into_iter().collect())
    }

    /// Gateways created on another gateway shape than the current one (the gateway
    /// minimum or `<cloud>_gateway_plan` changed since): one listing per cloud and owned
    /// tag. Replacing one (terminating its node) gives it the current shape.
    pub async fn old_shape_gateways(&self) -> Result<Vec<instances::Owned>, CloudError> {
        let mut out = Vec::new();
        for cloud in self.shared.clients.keyed() {
            let Some(ownership) = self.ownership_of(cloud) else {
                continue;
            };
            let current = naming::gateway_generation(&self.shared.config, cloud);
            let mut seen = BTreeSet::new();
            for tag in &ownership.tags {
                for owned in
                    instances::list_by_tag(&self.shared.clients, cloud, tag, ownership).await?
                {
                    if owned.marks.purpose == Purpose::Gateway
                        && owned.marks.gateway_gen.as_deref() != Some(current.as_str())
                        && seen.insert(owned.instance_ref.clone())
                    {
                        out.push(owned);
                    }
                }
            }
        }
        Ok(out)
    }

    async fn networks_of(&self, cloud: Cloud) -> Result<Vec<SiteNetwork>, SiteError> {
        let (Some(ownership), Some(ops)) =
            (self.ownership_of(cloud), self.shared.clients.get(cloud))
        else {
            return Ok(Vec::new());
        };
        Ok(ops
            .networks(ownership)
            .await?
            .into_iter()
            .map(|n| SiteNetwork {
                cloud,
                id: n.id,
                site: n.site,
                prefix: n.prefix,
                routed: n.routed,
            })
            .collect())
    }

    /// The sealed SSH key's id in `cloud`, created once: a listing the first time in this
    /// process, and a create when the account has none.
    pub(crate) async fn sealed_key(&self, cloud: Cloud) -> Result<String, SiteError> {
        if let Some(id) = lock(&self.shared.sites.sealed).get(&cloud) {
            return Ok(id.clone());
        }
        let marks = self
            .resource_marks(cloud, ResourceKind::SealedKey)
            .ok_or(SiteError::NoClient(cloud))?;
        let public = sealed_public_key(&marks.child, &marks.owner_tag);
        let name = sealed_key_name(&marks.child, &marks.owner_tag);
        let id = self
            .cloud_ops(cloud)?
            .ensure_sealed_key(&marks, &name, &public)
            .await?;
        lock(&self.shared.sites.sealed).insert(cloud, id.clone());
        Ok(id)
    }

    /// Opens `site` (at `location` of `cloud`) when it is not open yet, and answers it.
    pub async fn open_site(
        &self,
        cloud: Cloud,
        site: &str,
        location: &str,
    ) -> Result<OpenSite, SiteError> {
        if let Some(open) = self.shared.sites.get(site)
            && open.cloud == cloud
            && open.stable.closed_at.is_none()
        {
            return Ok(open);
        }
        let _opening = self.shared.sites.opening.lock().await;
        if let Some(open) = self.shared.sites.get(site)
            && open.cloud == cloud
            && open.stable.closed_at.is_none()
        {
            return Ok(open);
        }
        let ops = self.cloud_ops(cloud)?;
        let network = self.ensure_network(cloud, site, location).await?;
        let stable = self.ensure_stable(cloud, site, location).await?;
        let open = OpenSite {
            cloud,
            site: site.to_string(),
            network: network.id,
            prefix: network.prefix,
            stable,
            default_via: ops.node_default_via(network.prefix),
        };
        tracing::info!(site, %cloud, prefix = %open.prefix, address = %open.stable.ip, "The site is open");
        self.shared.sites.put(open.clone());
        Ok(open)
    }

    async fn ensure_network(
        &self,
        cloud: Cloud,
        site: &str,
        location: &str,
    ) -> Result<SiteNetwork, SiteError> {
        let mut used = BTreeSet::new();
        let mut mine = None;
        for other in self.shared.clients.keyed() {
            for network in self.networks_of(other).await? {
                used.insert(network.prefix);
                if other == cloud && network.site == site && mine.is_none() {
                    mine = Some(network);
                }
            }
        }
        let ops = self.cloud_ops(cloud)?;
        if let Some(network) = mine {
            if !network.routed {
                let found = crate::clouds::NetworkFound {
                    id: network.id.clone(),
                    site: network.site.clone(),
                    prefix: network.prefix,
                    routed: false,
                };
                ops.add_default_route(&found, self.waits()).await?;
                tracing::info!(site = %network.site, "Added the site's default route to its network");
            }
            return Ok(SiteNetwork {
                routed: true,
                ..network
            });
        }
        let prefix = (0..Prefix::COUNT)
            .filter_map(Prefix::new)
            .find(|p| !used.contains(p))
            .ok_or(SiteError::NoPrefix)?;
        let mut marks = self
            .resource_marks(cloud, ResourceKind::Network)
            .ok_or(SiteError::NoClient(cloud))?;
        marks.site = Some(site.to_string());
        marks.prefix = Some(prefix);
        let id = match ops.create_network(site, location, prefix, &marks).await {
            Ok(id) => id,
            Err(SiteError::Cloud(e)) if is_uniqueness(&e) => {
                let winner = self
                    .networks_of(cloud)
                    .await?
                    .into_iter()
                    .find(|n| n.site == site)
                    .ok_or(SiteError::Cloud(e))?;
                tracing::info!(
                    site,
                    "Another replica created the site's network at the same time; using it"
                );
                return Ok(winner);
            }
            Err(e) => return Err(e),
        };
        tracing::info!(site, %cloud, %prefix, "Created the site's private network");
        Ok(SiteNetwork {
            cloud,
            id,
            site: site.to_string(),
            prefix,
            routed: true,
        })
    }

    /// The site's stable IPv4 as the cloud holds it, if any: one listing.
    pub(crate) async fn find_stable(
        &self,
        cloud: Cloud,
        site: &str,
    ) -> Result<Option<StableAddress>, SiteError> {
        self.cloud_ops(cloud)?;
        if self.ownership_of(cloud).is_none() {
            return Err(SiteError::NoClient(cloud));
        }
        Ok(self
            .stable_found(cloud, Some(site))
            .await?
            .into_iter()
            .next()
            .map(|(_, address)| address))
    }

    async fn ensure_stable(
        &self,
        cloud: Cloud,
        site: &str,
        location: &str,
    ) -> Result<StableAddress, SiteError> {
        if let Some(found) = self.find_stable(cloud, site).await? {
            if found.closed_at.is_some() {
                return self.mark_stable(cloud, site, &found, None).await;
            }
            return Ok(found);
        }
        let mut marks = self
            .resource_marks(cloud, ResourceKind::Stable)
            .ok_or(SiteError::NoClient(cloud))?;
        marks.site = Some(site.to_string());
        let address = match self
            .cloud_ops(cloud)?
            .create_stable(site, location, &marks)
            .await
        {
            Ok(address) => address,
            Err(SiteError::Cloud(e)) if is_uniqueness(&e) => {
                return self
                    .find_stable(cloud, site)
                    .await?
                    .ok_or(SiteError::Cloud(e));
            }
            Err(e) => return Err(e),
        };
        tracing::info!(site, %cloud, address = %address.ip, "Reserved the site's stable public IPv4");
        Ok(address)
    }

    /// Records `closed_at` (or its absence) on a stable address.
    async fn mark_stable(
        &self,
        cloud: Cloud,
        site: &str,
        address: &StableAddress,
        closed_at: Option<Timestamp>,
    ) -> Result<StableAddress, SiteError> {
        let mut marks = self
            .resource_marks(cloud, ResourceKind::Stable)
            .ok_or(SiteError::NoClient(cloud))?;
        marks.site = Some(site.to_string());
        marks.closed_at = closed_at;
        self.cloud_ops(cloud)?.mark_stable(address, &marks).await?;
        Ok(StableAddress {
            closed_at,
            ..address.clone()
        })
    }

    /// Whether `site` in `cloud` still holds a tenant node other than `gone` (instance
    /// refs just deleted): one listing.
    pub(crate) async fn site_has_tenant_node(
        &self,
        cloud: Cloud,
        site: &str,
        gone: &[String],
    ) -> Result<bool, SiteError> {
        let Some(ownership) = self.ownership_of(cloud) else {
            return Ok(false);
        };
        let found = instances::list_at_site(&self.shared.clients, cloud, site, ownership).await?;
        Ok(found.iter().any(|o| {
            o.marks.purpose == Purpose::Tenant
                && o.state != orc_proto::InstanceState::Deleting
                && !gone.contains(&o.instance_ref)
        }))
    }

    /// Closes `site` when it holds no tenant node besides `gone` (instances of a node of
    /// role `ended` just deleted): its stable IPv4 records the close time (it is kept
    /// [`STABLE_KEEP`] for a returning site). After a tenant node, a close time already
    /// there is moved to `at`, so a node placed while the site was being closed keeps the
    /// full keep after it ends; after a gateway, a closed site is left as it is. Answers
    /// whether the site holds no tenant node.
    pub(crate) async fn close_site_if_empty(
        &self,
        cloud: Cloud,
        site: &str,
        gone: &[String],
        ended: Purpose,
        at: Timestamp,
    ) -> Result<bool, SiteError> {
        if self.site_has_tenant_node(cloud, site, gone).await? {
            return Ok(false);
        }
        let _opening = self.shared.sites.opening.lock().await;
        let cached = self.shared.sites.get(site).filter(|o| o.cloud == cloud);
        let stable = match cached.as_ref().map(|o| o.stable.clone()) {
            Some(stable) => Some(stable),
            None => self.find_stable(cloud, site).await?,
        };
        if let Some(stable) = stable
            && match (stable.closed_at, ended) {
                (None, Purpose::Tenant | Purpose::Gateway) => true,
                (Some(closed), Purpose::Tenant) => closed < at,
                (Some(_), Purpose::Gateway) => false,
            }
        {
            let closed = self.mark_stable(cloud, site, &stable, Some(at)).await?;
            if let Some(mut open) = cached {
                open.stable = closed;
                self.shared.sites.put(open);
            }
            tracing::info!(site, %cloud, "The site's last node ended; the site is closed and its stable address is kept for a returning site");
        }
        Ok(true)
    }

    /// Releases the stable IPv4 of every site closed at least [`STABLE_KEEP`] before `at`
    /// that holds no instance, checked again under the opening lock (a site reopened since
    /// the listing keeps its address). Answers the released addresses.
    pub async fn release_closed_addresses(&self, at: Timestamp) -> Vec<Ipv4Addr> {
        let mut released = Vec::new();
        for cloud in self.shared.clients.keyed() {
            let stable = match self.stable_addresses(cloud).await {
                Ok(stable) => stable,
                Err(e) => {
                    tracing::info!(%cloud, "The cloud's addresses could not be listed; closed sites' addresses are released on a later pass");
                    tracing::debug!(%cloud, error = %e, "the cloud's answer");
                    continue;
                }
            };
            for (site, stable) in &stable {
                let Some(closed) = stable.closed_at else {
                    continue;
                };
                if at.since(closed) < STABLE_KEEP {
                    continue;
                }
                match self.release_stable(cloud, site, stable).await {
                    Ok(true) => released.push(stable.ip),
                    Ok(false) => {}
                    Err(e) => {
                        tracing::info!(site = %site, %cloud, "A closed site's stable address could not be released; it is tried again on a later pass");
                        tracing::debug!(site = %site, error = %e, "the cloud's answer");
                    }
                }
            }
        }
        released
    }

    async fn release_stable(
        &self,
        cloud: Cloud,
        site: &str,
        stable: &StableAddress,
    ) -> Result<bool, SiteError> {
        let Some(ownership) = self.ownership_of(cloud) else {
            return Ok(false);
        };
        let _opening = self.shared.sites.opening.lock().await;
        let now_held = self.find_stable(cloud, site).await?;
        if now_held.as_ref().map(|s| s.closed_at) != Some(stable.closed_at) {
            return Ok(false);
        }
        let at_site = instances::list_at_site(&self.shared.clients, cloud, site, ownership).await?;
        if !at_site.is_empty() {
            return Ok(false);
        }
        match self.cloud_ops(cloud)?.delete_stable(stable).await {
            Ok(()) => {}
            Err(SiteError::Cloud(e)) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
        self.shared.sites.forget(site);
        tracing::info!(site, %cloud, address = %stable.ip, "Released the stable address of a site closed for seven days");
        Ok(true)
    }
}
