//! The partner's operations in a Hetzner Cloud project.
//!
//! Marks are labels, so every listing filters by label selector in the cloud (and again by
//! ownership here). A site network is a network with one cloud subnet and the route
//! `0.0.0.0/0` via the gateway's fixed address, so nodes route through the cloud's router
//! (`.1`); a stable IPv4 is a primary IP (not auto-deleted); a pool address is a floating
//! IP (the raw pool id in its description); an extra disk is a volume; the sealed key is an
//! SSH key. Servers, networks, primary and floating IPs have unique names, so a create
//! that loses a race to another replica is answered with the winner.
//!
//! Catalog: `GET /server_types` (plans, vCPUs, memory GB → MiB, architecture, gross
//! per-location prices, and `locations[].available` for stock), `GET /images?type=system`
//! (bootable images: available and not deprecated), `GET /pricing` (account currency and
//! the gross volume price per GB-month, used as the block-storage price per GiB-month).

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::net::Ipv4Addr;
use std::pin::Pin;

use orc_cloud::hetzner::{
    self, CreateFloatingIp, CreateNetwork, CreatePrimaryIp, CreateServer, CreateVolume,
    HcloudArchitecture, ImageFilter, ImageRef, ImageType, IpType, PublicNetRequest, Route,
    ServerFilter, SshKeyFilter, SubnetRequest, SubnetType, VolumePlacement,
};
use orc_cloud::{
    CloudError, HcloudFloatingIpId, HcloudImageId, HcloudNetworkId, HcloudPrimaryIpId,
    HcloudServerId, HcloudSshKeyId, HcloudVolumeId, HetznerClient, HetznerConfig,
};
use orc_common::{Architecture, FaultClass};
use orc_partner::catalog::{CatalogSnapshot, Image, LastAnswer, Plan, PlanPrice};
use orc_partner::ids::{Cloud, ImageId, LocationId, PlanId, Timestamp};
use orc_partner::secret::Secret;
use orc_proto::InstanceState;
use rust_decimal::Decimal;

use super::{
    AddressFound, CloudOp, CloudOps, CreateError, Disk, Held, InstanceSpec, Mark, NetworkFound,
    Waits, id_of, numeric_id, parse_v4,
};
use crate::instances::{Owned, Ownership};
use crate::inventory::SiteAddress;
use crate::naming::{
    self, CHILD_KEY, KIND_KEY, Marks, NODE_KEY, OWNER_KEY, Prefix, ResourceKind, ResourceMarks,
    SITE_KEY,
};
use crate::sites::{PoolAddressHeld, SiteError, StableAddress};

const CLOUD: Cloud = Cloud::Hetzner;

/// A Hetzner Cloud project, through its HTTP client.
#[derive(Debug, Clone)]
pub struct Hetzner {
    client: HetznerClient,
}

impl Hetzner {
    /// The client for `key` at `endpoint` (the API base `…/v1` as given).
    pub fn new(key: &Secret, endpoint: &str) -> Result<Hetzner, CloudError> {
        let base = endpoint.trim_end_matches('/').to_string();
        let client =
            HetznerClient::new(HetznerConfig::new(key.expose().to_string()).with_base_url(base))?;
        Ok(Hetzner { client })
    }

    async fn wait(
        &self,
        ids: &[orc_cloud::HcloudActionId],
        waits: Waits,
    ) -> Result<(), CloudError> {
        self.client
            .wait_for_actions(ids, waits.poll, waits.until())
            .await
            .map(|_| ())
    }

    /// The label selector of `ownership`'s child and `kind`.
    fn selector(ownership: &Ownership, kind: ResourceKind) -> String {
        format!(
            "{CHILD_KEY}={},{KIND_KEY}={}",
            ownership.child,
            kind.as_str()
        )
    }
}

/// Labels of an instance's marks: every mark as a label, the owner tag as `orc-owner`.
pub fn labels(marks: &Marks) -> BTreeMap<String, String> {
    let mut labels: BTreeMap<String, String> = marks
        .pairs()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    labels.insert(OWNER_KEY.to_string(), marks.owner_tag.clone());
    labels
}

/// An instance's marks read back from its labels.
pub fn marks_of(labels: &BTreeMap<String, String>) -> Option<Marks> {
    Marks::read(labels.get(OWNER_KEY).cloned(), |k| labels.get(k).cloned())
}

/// Labels of a site resource's marks (a label value holds no `/`, so a prefix is written
/// `10.128.3.0-24`).
pub fn resource_labels(marks: &ResourceMarks) -> BTreeMap<String, String> {
    marks
        .pairs(Prefix::label_value)
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

/// The label selector of a resource's owner, child and kind, plus its site.
pub fn resource_selector(marks: &ResourceMarks) -> String {
    let mut selector = format!(
        "{OWNER_KEY}={},{CHILD_KEY}={},{KIND_KEY}={}",
        marks.owner_tag,
        marks.child,
        marks.kind.as_str()
    );
    if let Some(site) = &marks.site {
        selector.push_str(&format!(",{SITE_KEY}={site}"));
    }
    selector
}

/// A site resource's marks read back from its labels.
pub fn resource_marks_of(labels: &BTreeMap<String, String>) -> Option<ResourceMarks> {
    ResourceMarks::read(|k| labels.get(k).cloned())
}

/// A server's state in protocol terms.
fn state(status: hetzner::ServerStatus) -> InstanceState {
    match status {
        hetzner::ServerStatus::Running => InstanceState::Running,
        hetzner::ServerStatus::Initializing
        | hetzner::ServerStatus::Starting
        | hetzner::ServerStatus::Migrating
        | hetzner::ServerStatus::Rebuilding
        | hetzner::ServerStatus::Unknown => InstanceState::Provisioning,
        hetzner::ServerStatus::Stopping | hetzner::ServerStatus::Off => InstanceState::Stopped,
        hetzner::ServerStatus::Deleting => InstanceState::Deleting,
    }
}

/// The server as the partner's instance, when it is one.
fn owned(server: &hetzner::Server, ownership: &Ownership) -> Option<Owned> {
    let marks = marks_of(&server.labels)?;
    if !ownership.admits(&marks) {
        return None;
    }
    let mut addresses = Vec::new();
    if let Some(ip) = server
        .public_net
        .ipv4
        .as_ref()
        .and_then(|v4| v4.ip.parse().ok())
    {
        addresses.push(ip);
    }
    Some(Owned {
        cloud: CLOUD,
        marks,
        instance_ref: format!("hetzner:{}", server.id),
        addresses,
        private: server.private_net.first().and_then(|n| n.ip.parse().ok()),
        state: state(server.status),
    })
}

/// A location's network zone. The built-in map's locations are known; another one is
/// looked up once.
fn known_network_zone(location: &str) -> Option<&'static str> {
    match location {
        "fsn1" | "nbg1" | "hel1" => Some("eu-central"),
        "ash" => Some("us-east"),
        "hil" => Some("us-west"),
        "sin" => Some("ap-southeast"),
        _ => None,
    }
}

/// The reverse DNS name Hetzner reports for `ip` (empty when it reports none).
fn ptr_of(entries: &[hetzner::DnsPtr], ip: &str) -> String {
    entries
        .iter()
        .find(|e| e.ip == ip)
        .map(|e| e.dns_ptr.clone())
        .unwrap_or_default()
}

/// Marks that are this partner's, of `kind`, with a site.
fn owned_marks(
    labels: &BTreeMap<String, String>,
    ownership: &Ownership,
    kind: ResourceKind,
) -> Option<(ResourceMarks, String)> {
    let marks = resource_marks_of(labels)?;
    if marks.kind != kind || !marks.owned_by(&ownership.child, &ownership.tags) {
        return None;
    }
    let site = marks.site.clone()?;
    Some((marks, site))
}

/// Reads one Hetzner Cloud project's catalog.
pub async fn read_catalog(
    client: &HetznerClient,
    now: Timestamp,
) -> Result<CatalogSnapshot, CloudError> {
    let types = client.list_server_types().await?;
    let images = client
        .list_images(&ImageFilter {
            kind: Some(ImageType::System),
            ..ImageFilter::default()
        })
        .await?;
    let pricing = client.pricing().await?;
    let mib_per_gb = Decimal::from(1024);
    let arch_of = |arch: HcloudArchitecture| Architecture::from(arch);
    let mut plans = Vec::with_capacity(types.len());
    for t in &types {
        let Ok(memory_mib) = u64::try_from((t.memory * mib_per_gb).trunc()) else {
            continue;
        };
        let prices: BTreeMap<LocationId, PlanPrice> = t
            .prices
            .iter()
            .filter_map(|p| {
                Some((
                    LocationId::new(p.location.clone()).ok()?,
                    PlanPrice {
                        monthly: p.price_monthly.gross,
                        hourly: p.price_hourly.gross,
                    },
                ))
            })
            .collect();
        let sold_in = t
            .locations
            .iter()
            .filter(|l| l.available)
            .filter_map(|l| LocationId::new(l.name.clone()).ok())
            .filter(|l| prices.contains_key(l))
            .collect();
        let Ok(id) = PlanId::new(t.name.clone()) else {
            continue;
        };
        plans.push(Plan {
            id,
            vcpus: t.cores,
            memory_mib,
            arch: arch_of(t.architecture),
            prices,
            sold_in,
        });
    }
    let images = images
        .iter()
        .filter(|i| i.kind == ImageType::System && i.status == "available")
        .filter(|i| i.deprecated.is_none())
        .filter_map(|i| {
            Some(Image {
                id: ImageId::new(i.id.to_string()).ok()?,
                name: i.name.clone(),
                family: i.os_flavor.clone(),
                title: i.description.clone(),
                arch: arch_of(i.architecture),
            })
        })
        .collect();
    Ok(CatalogSnapshot {
        cloud: CLOUD,
        currency: pricing.currency,
        plans,
        images,
        block_storage_per_gib_month: Some(pricing.volume.price_per_gb_month.gross),
        pool_address_monthly: pricing
            .floating_ips
            .iter()
            .filter(|p| p.kind == IpType::Ipv4)
            .flat_map(|p| &p.prices)
            .filter_map(|p| {
                Some((
                    LocationId::new(p.location.clone()).ok()?,
                    p.price_monthly.gross,
                ))
            })
            .collect(),
        read_at: now,
        last_answer: LastAnswer::Ok { at: now },
    })
}

impl CloudOps for Hetzner {
    fn request_counts(&self) -> BTreeMap<String, u64> {
        self.client.request_counts()
    }

    fn reset_counts(&self) {
        self.client.counters().reset();
    }

    fn read_catalog<'a>(
        &'a self,
        _mapped: &'a BTreeSet<LocationId>,
        now: Timestamp,
    ) -> CloudOp<'a, CatalogSnapshot> {
        Box::pin(read_catalog(&self.client, now))
    }

    fn list_instances<'a>(
        &'a self,
        (key, value): Mark<'a>,
        ownership: &'a Ownership,
    ) -> CloudOp<'a, Vec<Held>> {
        Box::pin(async move {
            let selector = format!("{key}={value},{CHILD_KEY}={}", ownership.child);
            let servers = self
                .client
                .list_servers(&ServerFilter {
                    label_selector: Some(selector),
                    ..ServerFilter::default()
                })
                .await?;
            Ok(servers
                .iter()
                .filter_map(|s| {
                    Some(Held {
                        owned: owned(s, ownership)?,
                        location: s.location.name.clone(),
                    })
                })
                .collect())
        })
    }

    fn get_instance<'a>(
        &'a self,
        id: &'a str,
        ownership: &'a Ownership,
    ) -> CloudOp<'a, Option<Owned>> {
        Box::pin(async move {
            let Ok(id) = id.parse::<u64>() else {
                return Ok(None);
            };
            let server = self.client.get_server(HcloudServerId(id)).await?;
            Ok(server.and_then(|s| owned(&s, ownership)))
        })
    }

    fn create_instance<'a>(
        &'a self,
        spec: InstanceSpec<'a>,
        ownership: &'a Ownership,
        waits: Waits,
    ) -> CloudOp<'a, Owned, CreateError> {
        Box::pin(async move {
            let unreadable = CreateError::Unusable("an id the partner cannot read");
            let (Ok(image), Ok(network), Some(key)) = (
                spec.image.parse::<u64>(),
                spec.network.parse::<u64>(),
                spec.sealed_key.parse().ok().map(HcloudSshKeyId),
            ) else {
                return Err(unreadable);
            };
            let mut request = CreateServer::new(
                spec.name.clone(),
                spec.plan.to_string(),
                ImageRef::Id(HcloudImageId(image)),
            );
            request.location = Some(spec.location.to_string());
            request.labels = labels(spec.marks);
            request.user_data = spec.user_data;
            request.ssh_keys = vec![key];
            match spec.stable {
                Some(stable) => {
                    let Ok(stable) = id_of(stable).parse::<u64>() else {
                        return Err(unreadable);
                    };
                    request.public_net = PublicNetRequest {
                        enable_ipv4: true,
                        enable_ipv6: false,
                        ipv4: Some(HcloudPrimaryIpId(stable)),
                        ipv6: None,
                    };
                }
                None => {
                    request.networks = vec![HcloudNetworkId(network)];
                    request.public_net = PublicNetRequest {
                        enable_ipv4: false,
                        enable_ipv6: false,
                        ipv4: None,
                        ipv6: None,
                    };
                }
            }
            let node = &spec.marks.node_id;
            match self.client.create_server(&request).await {
                Ok(created) => match self.wait(&created.action_ids(), waits).await {
                    Ok(()) => owned(&created.server, ownership).ok_or_else(|| {
                        tracing::warn!(node = %node, "the created server does not carry the partner's labels");
                        CreateError::Unusable("the created server does not carry the partner's labels")
                    }),
                    Err(e @ CloudError::ActionFailed { .. }) => {
                        let server = created.server.id;
                        match self.client.delete_server(server).await {
                            Ok(_) => {}
                            Err(gone) if gone.is_not_found() => {}
                            Err(cleanup) => {
                                tracing::warn!(node = %node, instance = %format!("hetzner:{server}"), error = %cleanup, "a server whose creation failed could not be deleted; the next deploy or inventory finds it");
                            }
                        }
                        Err(CreateError::Cloud(e))
                    }
                    Err(e) => Err(CreateError::Cloud(e)),
                },
                Err(e) if e.class() == FaultClass::Conflict => {
                    let winner = self
                        .client
                        .list_servers(&ServerFilter {
                            name: Some(spec.name.clone()),
                            ..ServerFilter::default()
                        })
                        .await
                        .map_err(CreateError::Cloud)?;
                    winner
                        .iter()
                        .filter_map(|s| owned(s, ownership))
                        .find(|o| o.marks.node_id == *node)
                        .ok_or_else(|| {
                            tracing::warn!(node = %node, "the node's server name is held by an instance that is not this node's");
                            CreateError::Unusable("the server name is held by another instance")
                        })
                }
                Err(e) => Err(CreateError::Cloud(e)),
            }
        })
    }

    fn delete_instance<'a>(&'a self, id: &'a str) -> CloudOp<'a, ()> {
        Box::pin(async move {
            let id: u64 = id.parse().map_err(|_| CloudError::InvalidInput {
                what: "server id",
                problem: format!("{id:?} is not a number"),
            })?;
            self.client
                .delete_server(HcloudServerId(id))
                .await
                .map(|_| ())
        })
    }

    fn shows_address_late(&self) -> bool {
        false
    }

    fn networks<'a>(&'a self, ownership: &'a Ownership) -> CloudOp<'a, Vec<NetworkFound>> {
        Box::pin(async move {
            let selector = Hetzner::selector(ownership, ResourceKind::Network);
            let mut out = Vec::new();
            for network in self.client.list_networks(Some(&selector)).await? {
                let Some((marks, site)) =
                    owned_marks(&network.labels, ownership, ResourceKind::Network)
                else {
                    continue;
                };
                let Some(prefix) = marks.prefix else {
                    continue;
                };
                let routed = network.routes.iter().any(|r| {
                    r.destination == "0.0.0.0/0" && r.gateway == prefix.gateway().to_string()
                });
                out.push(NetworkFound {
                    id: network.id.to_string(),
                    site,
                    prefix,
                    routed,
                });
            }
            Ok(out)
        })
    }

    fn create_network<'a>(
        &'a self,
        site: &'a str,
        location: &'a str,
        prefix: Prefix,
        marks: &'a ResourceMarks,
    ) -> CloudOp<'a, String, SiteError> {
        Box::pin(async move {
            let zone = match known_network_zone(location) {
                Some(zone) => zone.to_string(),
                None => self
                    .client
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
                labels: resource_labels(marks),
            };
            Ok(self.client.create_network(&request).await?.id.to_string())
        })
    }

    fn add_default_route<'a>(
        &'a self,
        network: &'a NetworkFound,
        waits: Waits,
    ) -> CloudOp<'a, (), SiteError> {
        Box::pin(async move {
            let id = numeric_id(&network.id)?;
            let route = Route {
                destination: "0.0.0.0/0".to_string(),
                gateway: network.prefix.gateway().to_string(),
            };
            let action = self.client.add_route(HcloudNetworkId(id), &route).await?;
            self.wait(&[action.id], waits).await?;
            Ok(())
        })
    }

    fn node_default_via(&self, prefix: Prefix) -> Ipv4Addr {
        prefix.router()
    }

    fn gateway_claims_address(&self) -> bool {
        false
    }

    fn attach_gateway_network<'a>(
        &'a self,
        instance: &'a str,
        network: &'a str,
        address: Ipv4Addr,
        waits: Waits,
    ) -> CloudOp<'a, bool, SiteError> {
        Box::pin(async move {
            let (server, network) = (numeric_id(instance)?, numeric_id(network)?);
            let ip = address.to_string();
            let attached = self
                .client
                .attach_server_to_network(
                    HcloudServerId(server),
                    HcloudNetworkId(network),
                    Some(&ip),
                )
                .await;
            let action = match attached {
                Ok(action) => action,
                Err(e) if e.class() == FaultClass::AlreadyAttached => return Ok(false),
                Err(e) => return Err(e.into()),
            };
            self.wait(&[action.id], waits).await?;
            Ok(true)
        })
    }

    fn addresses<'a>(
        &'a self,
        ownership: &'a Ownership,
        kinds: &'a [ResourceKind],
        site: Option<&'a str>,
    ) -> CloudOp<'a, Vec<AddressFound>> {
        Box::pin(async move {
            let mut out = Vec::new();
            let with_site = |kind: ResourceKind| {
                let mut selector = Hetzner::selector(ownership, kind);
                if let Some(site) = site {
                    selector.push_str(&format!(",{SITE_KEY}={site}"));
                }
                selector
            };
            if kinds.contains(&ResourceKind::Stable) {
                let kind = ResourceKind::Stable;
                for ip in self.client.list_primary_ips(Some(&with_site(kind))).await? {
                    if let Some((marks, site)) = owned_marks(&ip.labels, ownership, kind) {
                        out.push(AddressFound {
                            marks,
                            site,
                            id: format!("hetzner:{}", ip.id),
                            ptr: Some(ptr_of(&ip.dns_ptr, &ip.ip)),
                            ip: ip.ip,
                            location: ip.location.name,
                            attached_to: ip.assignee_id.map(|s| format!("hetzner:{s}")),
                            description: None,
                        });
                    }
                }
            }
            if kinds.contains(&ResourceKind::PoolAddress) {
                let kind = ResourceKind::PoolAddress;
                for ip in self
                    .client
                    .list_floating_ips(Some(&with_site(kind)))
                    .await?
                {
                    if let Some((marks, site)) = owned_marks(&ip.labels, ownership, kind) {
                        out.push(AddressFound {
                            marks,
                            site,
                            id: format!("hetzner:{}", ip.id),
                            ptr: Some(ptr_of(&ip.dns_ptr, &ip.ip)),
                            ip: ip.ip,
                            location: ip.home_location.name,
                            attached_to: ip.server.map(|s| format!("hetzner:{s}")),
                            description: ip.description,
                        });
                    }
                }
            }
            Ok(out)
        })
    }

    fn create_stable<'a>(
        &'a self,
        site: &'a str,
        location: &'a str,
        marks: &'a ResourceMarks,
    ) -> CloudOp<'a, StableAddress, SiteError> {
        Box::pin(async move {
            let created = self
                .client
                .create_primary_ip(&CreatePrimaryIp {
                    name: naming::scoped_name("gw", site, &marks.child, &marks.owner_tag),
                    kind: IpType::Ipv4,
                    location: location.to_string(),
                    labels: resource_labels(marks),
                    auto_delete: false,
                })
                .await?;
            Ok(StableAddress {
                id: format!("hetzner:{}", created.primary_ip.id),
                ip: parse_v4(&created.primary_ip.ip)?,
                closed_at: None,
            })
        })
    }

    fn mark_stable<'a>(
        &'a self,
        address: &'a StableAddress,
        marks: &'a ResourceMarks,
    ) -> CloudOp<'a, (), SiteError> {
        Box::pin(async move {
            let id = numeric_id(&address.id)?;
            self.client
                .update_primary_ip_labels(HcloudPrimaryIpId(id), &resource_labels(marks))
                .await?;
            Ok(())
        })
    }

    fn delete_stable<'a>(&'a self, address: &'a StableAddress) -> CloudOp<'a, (), SiteError> {
        Box::pin(async move {
            let id = numeric_id(&address.id)?;
            self.client.delete_primary_ip(HcloudPrimaryIpId(id)).await?;
            Ok(())
        })
    }

    fn create_pool_address<'a>(
        &'a self,
        location: &'a str,
        name: String,
        pool: &'a str,
        marks: &'a ResourceMarks,
    ) -> CloudOp<'a, (String, String), SiteError> {
        Box::pin(async move {
            let created = self
                .client
                .create_floating_ip(&CreateFloatingIp {
                    kind: IpType::Ipv4,
                    home_location: location.to_string(),
                    name: Some(name),
                    description: Some(format!("pool {pool}")),
                    labels: resource_labels(marks),
                })
                .await?;
            let ip = created.floating_ip;
            Ok((format!("hetzner:{}", ip.id), ip.ip))
        })
    }

    fn attach_pool_address<'a>(
        &'a self,
        address: &'a PoolAddressHeld,
        instance: &'a str,
        waits: Waits,
    ) -> CloudOp<'a, (), SiteError> {
        Box::pin(async move {
            let (Ok(ip), Ok(server)) = (numeric_id(&address.id), numeric_id(instance)) else {
                return Err(SiteError::BadAddress(address.id.clone()));
            };
            let action = self
                .client
                .assign_floating_ip(HcloudFloatingIpId(ip), HcloudServerId(server))
                .await?;
            self.wait(&[action.id], waits).await?;
            Ok(())
        })
    }

    fn delete_pool_address<'a>(
        &'a self,
        address: &'a PoolAddressHeld,
        waits: Waits,
    ) -> CloudOp<'a, (), SiteError> {
        Box::pin(async move {
            let id = HcloudFloatingIpId(numeric_id(&address.id)?);
            if address.attached_to.is_some() {
                match self.client.unassign_floating_ip(id).await {
                    Ok(action) => self.wait(&[action.id], waits).await?,
                    Err(e) if e.is_not_found() => return Ok(()),
                    Err(e) => return Err(e.into()),
                }
            }
            match self.client.delete_floating_ip(id).await {
                Ok(()) => Ok(()),
                Err(e) if e.is_not_found() => Ok(()),
                Err(e) => Err(e.into()),
            }
        })
    }

    fn read_reverse_dns<'a>(
        &'a self,
        _addresses: &'a mut [SiteAddress],
    ) -> Pin<Box<dyn Future<Output = BTreeMap<Ipv4Addr, String>> + Send + 'a>> {
        Box::pin(async { BTreeMap::new() })
    }

    fn set_reverse_dns<'a>(&'a self, address: &'a SiteAddress, name: &'a str) -> CloudOp<'a, ()> {
        Box::pin(async move {
            let ip = address.ipv4.to_string();
            let Ok(id) = id_of(&address.id).parse::<u64>() else {
                return Ok(());
            };
            match address.kind {
                ResourceKind::Stable => self
                    .client
                    .change_primary_ip_dns_ptr(HcloudPrimaryIpId(id), &ip, Some(name))
                    .await
                    .map(|_| ()),
                ResourceKind::PoolAddress => self
                    .client
                    .change_floating_ip_dns_ptr(HcloudFloatingIpId(id), &ip, Some(name))
                    .await
                    .map(|_| ()),
                ResourceKind::Network | ResourceKind::SealedKey | ResourceKind::Disk => Ok(()),
            }
        })
    }

    fn sealed_keys<'a>(&'a self, ownership: &'a Ownership) -> CloudOp<'a, Vec<String>> {
        Box::pin(async move {
            let filter = SshKeyFilter {
                label_selector: Some(format!("{CHILD_KEY}={}", ownership.child)),
                ..SshKeyFilter::default()
            };
            Ok(self
                .client
                .list_ssh_keys(&filter)
                .await?
                .into_iter()
                .filter(|key| {
                    resource_marks_of(&key.labels).is_some_and(|m| {
                        m.kind == ResourceKind::SealedKey
                            && m.owned_by(&ownership.child, &ownership.tags)
                    })
                })
                .map(|key| format!("hetzner:{}", key.id))
                .collect())
        })
    }

    fn ensure_sealed_key<'a>(
        &'a self,
        marks: &'a ResourceMarks,
        name: &'a str,
        public: &'a str,
    ) -> CloudOp<'a, String, SiteError> {
        Box::pin(async move {
            let filter = SshKeyFilter {
                label_selector: Some(resource_selector(marks)),
                ..SshKeyFilter::default()
            };
            if let Some(key) = self.client.list_ssh_keys(&filter).await?.first() {
                return Ok(key.id.to_string());
            }
            match self
                .client
                .create_ssh_key(name, public, &resource_labels(marks))
                .await
            {
                Ok(key) => Ok(key.id.to_string()),
                Err(e) if e.class() == FaultClass::Conflict => {
                    let by_name = SshKeyFilter {
                        name: Some(name.to_string()),
                        ..SshKeyFilter::default()
                    };
                    self.client
                        .list_ssh_keys(&by_name)
                        .await?
                        .first()
                        .map(|k| k.id.to_string())
                        .ok_or(SiteError::Cloud(e))
                }
                Err(e) => Err(e.into()),
            }
        })
    }

    fn node_disks<'a>(&'a self, node: &'a str, ownership: &'a Ownership) -> CloudOp<'a, Vec<Disk>> {
        Box::pin(async move {
            let selector = format!(
                "{NODE_KEY}={node},{CHILD_KEY}={},{KIND_KEY}=disk",
                ownership.child
            );
            let mut out = Vec::new();
            for volume in self.client.list_volumes(Some(&selector)).await? {
                if let Some(marks) = resource_marks_of(&volume.labels)
                    && marks.kind == ResourceKind::Disk
                    && marks.node.as_deref() == Some(node)
                    && marks.owned_by(&ownership.child, &ownership.tags)
                {
                    out.push(Disk {
                        id: format!("hetzner:{}", volume.id),
                        index: marks.disk.unwrap_or_default(),
                        attached_to: volume.server.map(|s| format!("hetzner:{s}")),
                    });
                }
            }
            Ok(out)
        })
    }

    fn create_disk<'a>(
        &'a self,
        instance: &'a str,
        _location: &'a str,
        name: String,
        size_gib: u32,
        marks: &'a ResourceMarks,
        waits: Waits,
    ) -> CloudOp<'a, (), SiteError> {
        Box::pin(async move {
            let server = numeric_id(instance)?;
            let created = self
                .client
                .create_volume(&CreateVolume {
                    name,
                    size_gb: u64::from(size_gib),
                    placement: VolumePlacement::Server {
                        server: HcloudServerId(server),
                        automount: false,
                    },
                    format: None,
                    labels: resource_labels(marks),
                })
                .await?;
            let mut ids: Vec<_> = created.next_actions.iter().map(|a| a.id).collect();
            ids.extend(created.action.iter().map(|a| a.id));
            self.wait(&ids, waits).await?;
            Ok(())
        })
    }

    fn attach_disk<'a>(
        &'a self,
        disk: &'a Disk,
        instance: &'a str,
        waits: Waits,
    ) -> CloudOp<'a, ()> {
        Box::pin(async move {
            let (Ok(server), Ok(volume)) = (numeric_id(instance), numeric_id(&disk.id)) else {
                return Ok(());
            };
            let action = self
                .client
                .attach_volume(HcloudVolumeId(volume), HcloudServerId(server), false)
                .await?;
            self.wait(&[action.id], waits).await
        })
    }

    fn delete_disk<'a>(&'a self, disk: &'a Disk, waits: Waits) -> CloudOp<'a, bool> {
        Box::pin(async move {
            let Ok(id) = numeric_id(&disk.id) else {
                return Ok(false);
            };
            let id = HcloudVolumeId(id);
            if disk.attached_to.is_some() {
                match self.client.detach_volume(id).await {
                    Ok(action) => self.wait(&[action.id], waits).await?,
                    Err(e) if e.is_not_found() => return Ok(false),
                    Err(e) => return Err(e),
                }
            }
            self.client.delete_volume(id).await.map(|()| true)
        })
    }
}

#[cfg(test)]
mod tests {
    use orc_partner::ids::Timestamp;

    use super::*;
    use crate::naming::{is_label_value, pool_label};
    use orc_common::Purpose;

    #[test]
    fn instance_marks_round_trip_as_labels() {
        let m = Marks {
            owner_tag: "orc-partner-hetzner".into(),
            child: naming::child_value("zone-1"),
            node_id: "n-000000000010".into(),
            site: "eu-central-a".into(),
            purpose: Purpose::Tenant,
            rate: Some("1.08".parse().unwrap()),
            account_monthly: "6.5331".parse().unwrap(),
            pool: Some(pool_label("acme/web/api")),
            gateway_gen: None,
        };
        assert_eq!(marks_of(&labels(&m)), Some(m.clone()));
        assert!(labels(&m).values().all(|v| is_label_value(v)));
        assert_eq!(m.usd_monthly(), Some("7.055748".parse().unwrap()));
        let unpriced = Marks { rate: None, ..m };
        assert_eq!(marks_of(&labels(&unpriced)), Some(unpriced));
    }

    #[test]
    fn site_resource_marks_round_trip_as_labels() {
        let mut m = ResourceMarks::new("orc-partner-hetzner", "zone-1", ResourceKind::Network);
        m.site = Some("eu-central-a".into());
        m.prefix = Prefix::new(259);
        let labels = resource_labels(&m);
        assert_eq!(labels["orc-prefix"], "10.129.3.0-24");
        assert!(labels.values().all(|v| is_label_value(v)), "{labels:?}");
        assert_eq!(resource_marks_of(&labels), Some(m.clone()));
        assert_eq!(
            resource_selector(&m),
            "orc-owner=orc-partner-hetzner,orc-partner-child=zone-1,orc-kind=network,orc-site=eu-central-a"
        );
        let mut stable = ResourceMarks::new("t", "zone-1", ResourceKind::Stable);
        stable.closed_at = Some(Timestamp::from_unix_millis(1_700_000_000_123));
        stable.pool = Some(pool_label("a/b/c"));
        stable.node = Some("n-1".into());
        stable.disk = Some(2);
        assert_eq!(resource_marks_of(&resource_labels(&stable)), Some(stable));
        assert!(m.owned_by("zone-1", &["orc-partner-hetzner".into()]));
        assert!(!m.owned_by("zone-2", &["orc-partner-hetzner".into()]));
    }
}
