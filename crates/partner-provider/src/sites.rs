//! Sites in the clouds: a site's private network, its stable public IPv4 and the sealed SSH
//! key of each cloud account, found by their marks ([`crate::naming::ResourceMarks`]) and
//! created when missing.
//!
//! Opening a site (on its first placement, tenant node or gateway alike) makes sure of:
//! - its private network with a /24 prefix unique in the zone ([`Prefix`], chosen as the
//!   lowest one no network of this partner holds in any keyed cloud, recorded on the
//!   network). On Hetzner the network carries the route `0.0.0.0/0` via the gateway's fixed
//!   private address (`.254`); Vultr VPCs have no route table, so there each node's first
//!   boot points its default route at `.254` ([`NetworkBoot`]) and the gateway claims `.254`
//!   on its VPC interface;
//! - its stable public IPv4 (Hetzner primary IP, Vultr reserved IP), never auto-deleted. A
//!   returning site takes its kept address back (the close time is removed).
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

use orc_cloud::hetzner::{
    CreateNetwork, CreatePrimaryIp, IpType, Route, SshKeyFilter, SubnetRequest, SubnetType,
};
use orc_cloud::{
    CloudError, HcloudNetworkId, HcloudPrimaryIpId, HcloudSshKeyId, HetznerClient, VultrClient,
    VultrReservedIpId, VultrSshKeyId,
};
use orc_common::FaultClass;
use orc_partner::ids::{Cloud, Timestamp};

use crate::instances::{self, Ownership};
use crate::naming::{
    self, Prefix, ResourceKind, ResourceMarks, Role, STABLE_KEEP, sealed_key_name,
    sealed_public_key,
};
use crate::provider::{PartnerProvider, lock};

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
    /// The cloud's id of the private network (Hetzner network id, Vultr VPC id).
    pub network: String,
    pub prefix: Prefix,
    pub stable: StableAddress,
}

/// What a node's first boot needs to reach the world through its site gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetworkBoot {
    pub prefix: Prefix,
    /// Where the node's default route points: Hetzner's router (which routes `0.0.0.0/0`
    /// to the gateway), or on Vultr the gateway itself.
    pub default_via: Ipv4Addr,
}

impl OpenSite {
    /// The first-boot network settings of a tenant node in this site.
    pub fn node_boot(&self) -> NetworkBoot {
        NetworkBoot {
            prefix: self.prefix,
            default_via: match self.cloud {
                Cloud::Hetzner => self.prefix.router(),
                Cloud::Vultr => self.prefix.gateway(),
            },
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
    pub(crate) addressing: tokio::sync::Mutex<()>,
}

impl SiteCache {
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
    #[error("every private prefix of 10.64.0.0/10 is taken")]
    NoPrefix,
    #[error("the cloud answered an address that is not IPv4: {0:?}")]
    BadAddress(String),
    #[error("the cloud does not list location {0:?}")]
    UnknownLocation(String),
}

/// A Hetzner location's network zone. The built-in map's locations are known; another one
/// is looked up once.
fn known_network_zone(location: &str) -> Option<&'static str> {
    match location {
        "fsn1" | "nbg1" | "hel1" => Some("eu-central"),
        "ash" => Some("us-east"),
        "hil" => Some("us-west"),
        "sin" => Some("ap-southeast"),
        _ => None,
    }
}

/// Whether a create lost a unique-name race (the name is taken for good).
pub(crate) fn is_uniqueness(error: &CloudError) -> bool {
    error.class() == FaultClass::Conflict
}

fn parse_v4(text: &str) -> Result<Ipv4Addr, SiteError> {
    text.parse()
        .map_err(|_| SiteError::BadAddress(text.to_string()))
}

/// A network of this partner: its site and prefix, with its cloud id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteNetwork {
    pub cloud: Cloud,
    pub id: String,
    pub site: String,
    pub prefix: Prefix,
    /// Hetzner: whether the route `0.0.0.0/0` via the gateway is on it.
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
    /// `hetzner:<floating IP id>` or `vultr:<reserved IP id>`.
    pub id: String,
    pub ip: Ipv4Addr,
    /// The instance it is attached to (`hetzner:<server id>` or `vultr:<instance id>`).
    pub attached_to: Option<String>,
}

impl PartnerProvider {
    /// The Hetzner client, or why there is none.
    fn hetzner_client(&self) -> Result<&HetznerClient, SiteError> {
        self.shared
            .clients
            .hetzner
            .as_ref()
            .ok_or(SiteError::NoClient(Cloud::Hetzner))
    }

    /// The Vultr client, or why there is none.
    fn vultr_client(&self) -> Result<&VultrClient, SiteError> {
        self.shared
            .clients
            .vultr
            .as_ref()
            .ok_or(SiteError::NoClient(Cloud::Vultr))
    }

    fn ownership_of(&self, cloud: Cloud) -> Option<&Ownership> {
        self.shared.ownership.get(&cloud)
    }

    fn owned(&self, cloud: Cloud, marks: &ResourceMarks) -> bool {
        self.ownership_of(cloud)
            .is_some_and(|o| marks.owned_by(&o.child, &o.tags))
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
        let mut out = SiteResources {
            networks: self.networks_of(cloud).await?,
            stable: self.stable_addresses(cloud).await?,
            pool_addresses: self.pool_addresses(cloud).await?,
            sealed_keys: Vec::new(),
        };
        let sealed = |marks: Option<ResourceMarks>| {
            marks.is_some_and(|m| {
                m.kind == ResourceKind::SealedKey && m.owned_by(&ownership.child, &ownership.tags)
            })
        };
        match cloud {
            Cloud::Hetzner => {
                let client = self.hetzner_client()?;
                let filter = SshKeyFilter {
                    label_selector: Some(format!("{}={}", naming::CHILD_KEY, ownership.child)),
                    ..SshKeyFilter::default()
                };
                for key in client.list_ssh_keys(&filter).await? {
                    if sealed(ResourceMarks::from_hetzner(&key.labels)) {
                        out.sealed_keys.push(format!("hetzner:{}", key.id));
                    }
                }
            }
            Cloud::Vultr => {
                let client = self.vultr_client()?;
                for key in client.list_ssh_keys().await? {
                    if sealed(ResourceMarks::from_vultr(&key.name)) {
                        out.sealed_keys.push(format!("vultr:{}", key.id));
                    }
                }
            }
        }
        Ok(out)
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

    /// The stable IPv4s of this partner in `cloud`, by site: one listing.
    pub async fn stable_addresses(
        &self,
        cloud: Cloud,
    ) -> Result<BTreeMap<String, StableAddress>, SiteError> {
        let mut out = BTreeMap::new();
        let Some(ownership) = self.ownership_of(cloud) else {
            return Ok(out);
        };
        let mut add =
            |marks: Option<ResourceMarks>, id: String, ip: &str| -> Result<(), SiteError> {
                let Some(marks) = marks else {
                    return Ok(());
                };
                if marks.kind != ResourceKind::Stable
                    || !marks.owned_by(&ownership.child, &ownership.tags)
                {
                    return Ok(());
                }
                if let Some(site) = marks.site {
                    out.insert(
                        site,
                        StableAddress {
                            id,
                            ip: parse_v4(ip)?,
                            closed_at: marks.closed_at,
                        },
                    );
                }
                Ok(())
            };
        match cloud {
            Cloud::Hetzner => {
                let Some(client) = &self.shared.clients.hetzner else {
                    return Ok(BTreeMap::new());
                };
                let selector = format!(
                    "{}={},{}={}",
                    naming::CHILD_KEY,
                    ownership.child,
                    naming::KIND_KEY,
                    ResourceKind::Stable.as_str()
                );
                for ip in client.list_primary_ips(Some(&selector)).await? {
                    add(
                        ResourceMarks::from_hetzner(&ip.labels),
                        format!("hetzner:{}", ip.id),
                        &ip.ip,
                    )?;
                }
            }
            Cloud::Vultr => {
                let Some(client) = &self.shared.clients.vultr else {
                    return Ok(BTreeMap::new());
                };
                for ip in client.list_reserved_ips().await? {
                    add(
                        ResourceMarks::from_vultr(&ip.label),
                        format!("vultr:{}", ip.id),
                        &ip.subnet,
                    )?;
                }
            }
        }
        Ok(out)
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
                    if owned.marks.role == Role::Gateway
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

    async fn hetzner_networks(&self) -> Result<Vec<SiteNetwork>, SiteError> {
        let cloud = Cloud::Hetzner;
        let Some(client) = &self.shared.clients.hetzner else {
            return Ok(Vec::new());
        };
        let Some(ownership) = self.ownership_of(cloud) else {
            return Ok(Vec::new());
        };
        let selector = format!(
            "{}={},{}={}",
            naming::CHILD_KEY,
            ownership.child,
            naming::KIND_KEY,
            ResourceKind::Network.as_str()
        );
        let mut out = Vec::new();
        for network in client.list_networks(Some(&selector)).await? {
            let Some(marks) = ResourceMarks::from_hetzner(&network.labels) else {
                continue;
            };
            if !self.owned(cloud, &marks) {
                continue;
            }
            let (Some(site), Some(prefix)) = (marks.site, marks.prefix) else {
                continue;
            };
            let routed = network
                .routes
                .iter()
                .any(|r| r.destination == "0.0.0.0/0" && r.gateway == prefix.gateway().to_string());
            out.push(SiteNetwork {
                cloud,
                id: network.id.to_string(),
                site,
                prefix,
                routed,
            });
        }
        Ok(out)
    }

    async fn vultr_networks(&self) -> Result<Vec<SiteNetwork>, SiteError> {
        let cloud = Cloud::Vultr;
        let Some(client) = &self.shared.clients.vultr else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for vpc in client.list_vpcs().await? {
            let Some(marks) = ResourceMarks::from_vultr(&vpc.description) else {
                continue;
            };
            if marks.kind != ResourceKind::Network || !self.owned(cloud, &marks) {
                continue;
            }
            let (Some(site), Some(prefix)) = (marks.site, marks.prefix) else {
                continue;
            };
            out.push(SiteNetwork {
                cloud,
                id: vpc.id.to_string(),
                site,
                prefix,
                routed: true,
            });
        }
        Ok(out)
    }

    async fn networks_of(&self, cloud: Cloud) -> Result<Vec<SiteNetwork>, SiteError> {
        match cloud {
            Cloud::Hetzner => self.hetzner_networks().await,
            Cloud::Vultr => self.vultr_networks().await,
        }
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
        let id = match cloud {
            Cloud::Hetzner => {
                let client = self.hetzner_client()?;
                let filter = SshKeyFilter {
                    label_selector: Some(marks.hetzner_selector()),
                    ..SshKeyFilter::default()
                };
                let found = client.list_ssh_keys(&filter).await?;
                match found.first() {
                    Some(key) => key.id,
                    None => match client
                        .create_ssh_key(&name, &public, &marks.hetzner_labels())
                        .await
                    {
                        Ok(key) => key.id,
                        Err(e) if is_uniqueness(&e) => {
                            let by_name = SshKeyFilter {
                                name: Some(name.clone()),
                                ..SshKeyFilter::default()
                            };
                            client
                                .list_ssh_keys(&by_name)
                                .await?
                                .first()
                                .map(|k| k.id)
                                .ok_or(SiteError::Cloud(e))?
                        }
                        Err(e) => return Err(e.into()),
                    },
                }
                .to_string()
            }
            Cloud::Vultr => {
                let client = self.vultr_client()?;
                let found = client.list_ssh_keys().await?.into_iter().find(|k| {
                    ResourceMarks::from_vultr(&k.name)
                        .is_some_and(|m| m.kind == ResourceKind::SealedKey && m == marks)
                });
                match found {
                    Some(key) => key.id.to_string(),
                    None => client
                        .create_ssh_key(&marks.vultr_text(), &public)
                        .await?
                        .id
                        .to_string(),
                }
            }
        };
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
        let network = self.ensure_network(cloud, site, location).await?;
        let stable = self.ensure_stable(cloud, site, location).await?;
        let open = OpenSite {
            cloud,
            site: site.to_string(),
            network: network.id,
            prefix: network.prefix,
            stable,
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
        if let Some(network) = mine {
            if !network.routed {
                self.add_default_route(&network).await?;
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
        let id = match cloud {
            Cloud::Hetzner => {
                let client = self.hetzner_client()?;
                let zone = match known_network_zone(location) {
                    Some(zone) => zone.to_string(),
                    None => client
                        .list_locations()
                        .await?
                        .into_iter()
                        .find(|l| l.name == location)
                        .map(|l| l.network_zone)
                        .ok_or_else(|| SiteError::UnknownLocation(location.to_string()))?,
                };
                let request = CreateNetwork {
                    name: naming::scoped_name("net", site, &marks.child, &marks.owner_tag),
                    ip_range: prefix.to_string(),
                    subnets: vec![SubnetRequest {
                        kind: SubnetType::Cloud,
                        ip_range: prefix.to_string(),
                        network_zone: zone,
                    }],
                    routes: vec![Route {
                        destination: "0.0.0.0/0".to_string(),
                        gateway: prefix.gateway().to_string(),
                    }],
                    labels: marks.hetzner_labels(),
                };
                match client.create_network(&request).await {
                    Ok(network) => network.id.to_string(),
                    Err(e) if is_uniqueness(&e) => {
                        let winner = self
                            .hetzner_networks()
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
                    Err(e) => return Err(e.into()),
                }
            }
            Cloud::Vultr => {
                let client = self.vultr_client()?;
                let network = prefix.network().to_string();
                client
                    .create_vpc(
                        &location.into(),
                        &marks.vultr_text(),
                        Some((network.as_str(), prefix.bits())),
                    )
                    .await?
                    .id
                    .to_string()
            }
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

    async fn add_default_route(&self, network: &SiteNetwork) -> Result<(), SiteError> {
        let Some(client) = &self.shared.clients.hetzner else {
            return Err(SiteError::NoClient(Cloud::Hetzner));
        };
        let id: u64 = network
            .id
            .parse()
            .map_err(|_| SiteError::BadAddress(network.id.clone()))?;
        let route = Route {
            destination: "0.0.0.0/0".to_string(),
            gateway: network.prefix.gateway().to_string(),
        };
        let action = client.add_route(HcloudNetworkId(id), &route).await?;
        let deadline = tokio::time::Instant::now() + self.shared.options.deploy_deadline;
        client
            .wait_for_actions(&[action.id], self.shared.options.poll_interval, deadline)
            .await?;
        tracing::info!(site = %network.site, "Added the site's default route to its network");
        Ok(())
    }

    /// The site's stable IPv4 as the cloud holds it, if any: one listing.
    pub(crate) async fn find_stable(
        &self,
        cloud: Cloud,
        site: &str,
    ) -> Result<Option<StableAddress>, SiteError> {
        let mut marks = self
            .resource_marks(cloud, ResourceKind::Stable)
            .ok_or(SiteError::NoClient(cloud))?;
        marks.site = Some(site.to_string());
        match cloud {
            Cloud::Hetzner => {
                let client = self.hetzner_client()?;
                let selector = format!(
                    "{}={},{}={},{}={}",
                    naming::CHILD_KEY,
                    marks.child,
                    naming::KIND_KEY,
                    ResourceKind::Stable.as_str(),
                    naming::SITE_KEY,
                    site
                );
                for ip in client.list_primary_ips(Some(&selector)).await? {
                    let Some(found) = ResourceMarks::from_hetzner(&ip.labels) else {
                        continue;
                    };
                    if self.owned(cloud, &found) {
                        return Ok(Some(StableAddress {
                            id: format!("hetzner:{}", ip.id),
                            ip: parse_v4(&ip.ip)?,
                            closed_at: found.closed_at,
                        }));
                    }
                }
                Ok(None)
            }
            Cloud::Vultr => {
                let client = self.vultr_client()?;
                for ip in client.list_reserved_ips().await? {
                    let Some(found) = ResourceMarks::from_vultr(&ip.label) else {
                        continue;
                    };
                    if found.kind == ResourceKind::Stable
                        && found.site.as_deref() == Some(site)
                        && self.owned(cloud, &found)
                    {
                        return Ok(Some(StableAddress {
                            id: format!("vultr:{}", ip.id),
                            ip: parse_v4(&ip.subnet)?,
                            closed_at: found.closed_at,
                        }));
                    }
                }
                Ok(None)
            }
        }
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
        let address = match cloud {
            Cloud::Hetzner => {
                let client = self.hetzner_client()?;
                let created = match client
                    .create_primary_ip(&CreatePrimaryIp {
                        name: naming::scoped_name("gw", site, &marks.child, &marks.owner_tag),
                        kind: IpType::Ipv4,
                        location: location.to_string(),
                        labels: marks.hetzner_labels(),
                        auto_delete: false,
                    })
                    .await
                {
                    Ok(created) => created,
                    Err(e) if is_uniqueness(&e) => {
                        return self
                            .find_stable(cloud, site)
                            .await?
                            .ok_or(SiteError::Cloud(e));
                    }
                    Err(e) => return Err(e.into()),
                };
                StableAddress {
                    id: format!("hetzner:{}", created.primary_ip.id),
                    ip: parse_v4(&created.primary_ip.ip)?,
                    closed_at: None,
                }
            }
            Cloud::Vultr => {
                let client = self.vultr_client()?;
                let created = client
                    .create_reserved_ip(&location.into(), "v4", Some(&marks.vultr_text()))
                    .await?;
                StableAddress {
                    id: format!("vultr:{}", created.id),
                    ip: parse_v4(&created.subnet)?,
                    closed_at: None,
                }
            }
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
        let (_, id) = address.id.split_once(':').unwrap_or(("", &address.id));
        match cloud {
            Cloud::Hetzner => {
                let client = self.hetzner_client()?;
                let id: u64 = id
                    .parse()
                    .map_err(|_| SiteError::BadAddress(address.id.clone()))?;
                client
                    .update_primary_ip_labels(HcloudPrimaryIpId(id), &marks.hetzner_labels())
                    .await?;
            }
            Cloud::Vultr => {
                let client = self.vultr_client()?;
                client
                    .update_reserved_ip_label(&VultrReservedIpId::from(id), &marks.vultr_text())
                    .await?;
            }
        }
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
            o.marks.role == Role::Node
                && o.state != orc_proto::NodeState::Deleting
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
        ended: Role,
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
                (None, Role::Node | Role::Gateway) => true,
                (Some(closed), Role::Node) => closed < at,
                (Some(_), Role::Gateway) => false,
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
        let (_, id) = stable.id.split_once(':').unwrap_or(("", &stable.id));
        let result = match cloud {
            Cloud::Hetzner => {
                let client = self.hetzner_client()?;
                let id: u64 = id
                    .parse()
                    .map_err(|_| SiteError::BadAddress(stable.id.clone()))?;
                client.delete_primary_ip(HcloudPrimaryIpId(id)).await
            }
            Cloud::Vultr => {
                let client = self.vultr_client()?;
                client
                    .delete_reserved_ip(&VultrReservedIpId::from(id))
                    .await
            }
        };
        match result {
            Ok(()) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
        self.shared.sites.forget(site);
        tracing::info!(site, %cloud, address = %stable.ip, "Released the stable address of a site closed for seven days");
        Ok(true)
    }
}

/// The Hetzner SSH key id of a sealed key reference.
pub(crate) fn hetzner_key_id(id: &str) -> Option<HcloudSshKeyId> {
    id.parse().ok().map(HcloudSshKeyId)
}

/// The Vultr SSH key id of a sealed key reference.
pub(crate) fn vultr_key_id(id: &str) -> VultrSshKeyId {
    VultrSshKeyId::from(id)
}
