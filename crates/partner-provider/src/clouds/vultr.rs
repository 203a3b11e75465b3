//! The partner's operations in a Vultr account.
//!
//! Instances take tags (the bare owner tag, then `key=value` tags), so a listing by mark is
//! a listing by tag. VPCs, reserved IPs, SSH keys and blocks take none: their marks are
//! `key=value` words in the description, label or name, and their listings are filtered
//! here. A site network is a VPC, which has no route table, so each node's first boot
//! points its default route at the gateway (`.254`) and the gateway claims `.254` itself;
//! a stable IPv4 and a pool address are reserved IPs; an extra disk is a block. A new
//! instance shows its public address only once it is up.
//!
//! Catalog: `GET /plans` (vCPUs, memory MB, the static price and location catalogue),
//! `GET /os` (images), and `GET /regions/{r}/availability` for each Vultr location the
//! region map names, which is what is sold there right now. Vultr bills in US dollars and
//! its API has no block-storage price, so
//! [`orc_partner::seed::VULTR_BLOCK_STORAGE_USD_PER_GIB_MONTH`] is used.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::net::Ipv4Addr;
use std::pin::Pin;

use orc_cloud::vultr::{
    self, CreateBlock, CreateInstance, InstanceFilter, InstanceSource, InstanceStatus, PowerStatus,
};
use orc_cloud::{
    CloudError, VultrBlockId, VultrClient, VultrConfig, VultrInstanceId, VultrOsId, VultrRegionId,
    VultrReservedIpId, VultrSshKeyId, VultrVpcId,
};
use orc_common::{Architecture, Currency};
use orc_partner::catalog::{CatalogSnapshot, Image, LastAnswer, Plan, PlanPrice};
use orc_partner::ids::{Cloud, ImageId, LocationId, PlanId, Timestamp};
use orc_partner::secret::Secret;
use orc_partner::seed::VULTR_BLOCK_STORAGE_USD_PER_GIB_MONTH;
use orc_proto::InstanceState;
use rust_decimal::Decimal;

use super::{
    AddressFound, CloudOp, CloudOps, CreateError, Disk, Held, InstanceSpec, Mark, NetworkFound,
    Waits, id_of, parse_v4, public_address,
};
use crate::instances::{Owned, Ownership};
use crate::inventory::SiteAddress;
use crate::naming::{Marks, OWNER_KEY, Prefix, ResourceKind, ResourceMarks};
use crate::sites::{PoolAddressHeld, SiteError, StableAddress};

const CLOUD: Cloud = Cloud::Vultr;

/// Hours in a month, for a plan that lists no hourly price.
const HOURS_PER_MONTH: u32 = 730;

/// A Vultr account, through its HTTP client.
#[derive(Debug, Clone)]
pub struct Vultr {
    client: VultrClient,
}

/// The Vultr base URL for an endpoint: the endpoint with `/v2` added unless present.
pub fn base_url(endpoint: &str) -> String {
    let trimmed = endpoint.trim_end_matches('/');
    if trimmed.ends_with("/v2") {
        trimmed.to_string()
    } else {
        format!("{trimmed}/v2")
    }
}

impl Vultr {
    /// The client for `key` at `endpoint` (the API root; `/v2` is added unless present).
    pub fn new(key: &Secret, endpoint: &str) -> Result<Vultr, CloudError> {
        let client = VultrClient::new(
            VultrConfig::new(key.expose().to_string()).with_base_url(base_url(endpoint)),
        )?;
        Ok(Vultr { client })
    }
}

/// Tags of an instance's marks: the bare owner tag, then `key=value` tags.
pub fn tags(marks: &Marks) -> Vec<String> {
    let mut tags = vec![marks.owner_tag.clone()];
    tags.extend(marks.pairs().into_iter().map(|(k, v)| format!("{k}={v}")));
    tags
}

/// An instance's marks read back from its tags, with `owned` the owner tags to look for;
/// `None` when a mark is missing or unreadable, or no owned tag is present.
pub fn marks_of(tags: &[String], owned: &[String]) -> Option<Marks> {
    let get = |key: &str| {
        let prefix = format!("{key}=");
        tags.iter()
            .find_map(|t| t.strip_prefix(&prefix).map(str::to_string))
    };
    let owner = owned.iter().find(|o| tags.contains(o)).cloned();
    Marks::read(owner, get)
}

/// The text of a site resource's marks (a VPC description, a reserved IP label, an SSH key
/// name, a block label): `key=value` words separated by spaces.
pub fn resource_text(marks: &ResourceMarks) -> String {
    marks
        .pairs(|prefix| prefix.to_string())
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A site resource's marks read back from its text.
pub fn resource_marks_of(text: &str) -> Option<ResourceMarks> {
    let words: BTreeMap<&str, &str> = text
        .split_whitespace()
        .filter_map(|w| w.split_once('='))
        .collect();
    ResourceMarks::read(|k| words.get(k).map(|v| v.to_string()))
}

/// An instance's state in protocol terms.
fn state(status: InstanceStatus, power: PowerStatus) -> InstanceState {
    match (status, power) {
        (InstanceStatus::Active, PowerStatus::Running) => InstanceState::Running,
        (InstanceStatus::Active, PowerStatus::Stopped)
        | (InstanceStatus::Suspended, PowerStatus::Running)
        | (InstanceStatus::Suspended, PowerStatus::Stopped)
        | (InstanceStatus::Suspended, PowerStatus::Unknown) => InstanceState::Stopped,
        (InstanceStatus::Active, PowerStatus::Unknown)
        | (InstanceStatus::Pending, PowerStatus::Running)
        | (InstanceStatus::Pending, PowerStatus::Stopped)
        | (InstanceStatus::Pending, PowerStatus::Unknown)
        | (InstanceStatus::Resizing, PowerStatus::Running)
        | (InstanceStatus::Resizing, PowerStatus::Stopped)
        | (InstanceStatus::Resizing, PowerStatus::Unknown)
        | (InstanceStatus::Unknown, PowerStatus::Running)
        | (InstanceStatus::Unknown, PowerStatus::Stopped)
        | (InstanceStatus::Unknown, PowerStatus::Unknown) => InstanceState::Provisioning,
    }
}

/// The instance as the partner's, when it is one.
fn owned(instance: &vultr::Instance, ownership: &Ownership) -> Option<Owned> {
    let marks = marks_of(&instance.tags, &ownership.tags)?;
    if !ownership.admits(&marks) {
        return None;
    }
    Some(Owned {
        cloud: CLOUD,
        marks,
        instance_ref: format!("vultr:{}", instance.id),
        addresses: public_address(&instance.main_ip).into_iter().collect(),
        private: public_address(&instance.internal_ip),
        state: state(instance.status, instance.power_status),
    })
}

/// Marks of `text` that are this partner's, of `kind`.
fn owned_marks(text: &str, ownership: &Ownership, kind: ResourceKind) -> Option<ResourceMarks> {
    resource_marks_of(text)
        .filter(|m| m.kind == kind && m.owned_by(&ownership.child, &ownership.tags))
}

/// The architecture of a plan: the API names none, and only plan ids with `arm` in them
/// are ARM.
fn plan_arch(id: &str) -> Architecture {
    if id.contains("arm") {
        Architecture::Arm64
    } else {
        Architecture::X86_64
    }
}

/// Reads one Vultr account's catalog; `regions` are the locations whose live stock is read.
pub async fn read_catalog(
    client: &VultrClient,
    regions: &BTreeSet<LocationId>,
    now: Timestamp,
) -> Result<CatalogSnapshot, CloudError> {
    let listed = client.list_plans(None).await?;
    let os = client.list_os().await?;
    let mut stock: BTreeMap<LocationId, BTreeSet<String>> = BTreeMap::new();
    for region in regions {
        let available = client
            .region_availability(&VultrRegionId::from(region.as_str()))
            .await?;
        stock.insert(
            region.clone(),
            available.iter().map(|p| p.to_string()).collect(),
        );
    }
    let mut plans = Vec::with_capacity(listed.len());
    for p in &listed {
        let hourly = p
            .hourly_cost
            .unwrap_or_else(|| p.monthly_cost / Decimal::from(HOURS_PER_MONTH));
        let price = PlanPrice {
            monthly: p.monthly_cost,
            hourly,
        };
        let id = p.id.to_string();
        let prices: BTreeMap<LocationId, PlanPrice> = p
            .locations
            .iter()
            .filter_map(|l| Some((LocationId::new(l.to_string()).ok()?, price)))
            .collect();
        let sold_in = prices
            .keys()
            .filter(|l| stock.get(*l).is_some_and(|s| s.contains(&id)))
            .cloned()
            .collect();
        let arch = plan_arch(&id);
        let Ok(id) = PlanId::new(id) else {
            continue;
        };
        plans.push(Plan {
            arch,
            id,
            vcpus: p.vcpu_count,
            memory_mib: p.ram,
            prices,
            sold_in,
        });
    }
    let images = os
        .iter()
        .filter_map(|o| {
            let arch = match o.arch.as_str() {
                "x64" => Architecture::X86_64,
                "arm64" | "aarch64" => Architecture::Arm64,
                _ => return None,
            };
            Some(Image {
                id: ImageId::new(o.id.to_string()).ok()?,
                name: None,
                family: o.family.clone(),
                title: o.name.clone(),
                arch,
            })
        })
        .collect();
    // The API lists no price for reserved IPs: the published one, wherever plans sell.
    let pool_address_monthly = plans
        .iter()
        .flat_map(|p| p.prices.keys())
        .map(|l| (l.clone(), orc_partner::seed::VULTR_RESERVED_IPV4_USD_MONTH))
        .collect();
    Ok(CatalogSnapshot {
        cloud: CLOUD,
        currency: Currency::USD,
        plans,
        images,
        block_storage_per_gib_month: Some(VULTR_BLOCK_STORAGE_USD_PER_GIB_MONTH),
        pool_address_monthly,
        read_at: now,
        last_answer: LastAnswer::Ok { at: now },
    })
}

impl CloudOps for Vultr {
    fn request_counts(&self) -> BTreeMap<String, u64> {
        self.client.request_counts()
    }

    fn reset_counts(&self) {
        self.client.counters().reset();
    }

    fn read_catalog<'a>(
        &'a self,
        mapped: &'a BTreeSet<LocationId>,
        now: Timestamp,
    ) -> CloudOp<'a, CatalogSnapshot> {
        Box::pin(read_catalog(&self.client, mapped, now))
    }

    fn list_instances<'a>(
        &'a self,
        (key, value): Mark<'a>,
        ownership: &'a Ownership,
    ) -> CloudOp<'a, Vec<Held>> {
        Box::pin(async move {
            let tag = if key == OWNER_KEY {
                value.to_string()
            } else {
                format!("{key}={value}")
            };
            let instances = self
                .client
                .list_instances(&InstanceFilter {
                    tag: Some(tag),
                    ..InstanceFilter::default()
                })
                .await?;
            Ok(instances
                .iter()
                .filter_map(|i| {
                    Some(Held {
                        owned: owned(i, ownership)?,
                        location: i.region.to_string(),
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
            let instance = self.client.get_instance(&VultrInstanceId::from(id)).await?;
            Ok(instance.and_then(|i| owned(&i, ownership)))
        })
    }

    fn create_instance<'a>(
        &'a self,
        spec: InstanceSpec<'a>,
        ownership: &'a Ownership,
        _waits: Waits,
    ) -> CloudOp<'a, Owned, CreateError> {
        Box::pin(async move {
            let Ok(os) = spec.image.parse::<u64>() else {
                return Err(CreateError::Unusable("an image id the partner cannot read"));
            };
            let mut request =
                CreateInstance::new(spec.location, spec.plan, InstanceSource::Os(VultrOsId(os)));
            request.label = Some(spec.name.clone());
            request.hostname = Some(spec.name.clone());
            request.tags = tags(spec.marks);
            request.user_data = spec.user_data;
            request.attach_vpc = vec![VultrVpcId::from(spec.network)];
            request.sshkey_id = vec![VultrSshKeyId::from(spec.sealed_key)];
            match spec.stable {
                Some(stable) => {
                    request.reserved_ipv4 = Some(VultrReservedIpId::from(id_of(stable)))
                }
                None => request.disable_public_ipv4 = true,
            }
            let instance = self
                .client
                .create_instance(&request)
                .await
                .map_err(CreateError::Cloud)?;
            owned(&instance, ownership).ok_or_else(|| {
                tracing::warn!(node = %spec.marks.node_id, "the created instance does not carry the partner's tags");
                CreateError::Unusable("the created instance does not carry the partner's tags")
            })
        })
    }

    fn delete_instance<'a>(&'a self, id: &'a str) -> CloudOp<'a, ()> {
        Box::pin(async move {
            self.client
                .delete_instance(&VultrInstanceId::from(id))
                .await
        })
    }

    fn shows_address_late(&self) -> bool {
        true
    }

    fn networks<'a>(&'a self, ownership: &'a Ownership) -> CloudOp<'a, Vec<NetworkFound>> {
        Box::pin(async move {
            let mut out = Vec::new();
            for vpc in self.client.list_vpcs().await? {
                let Some(marks) = owned_marks(&vpc.description, ownership, ResourceKind::Network)
                else {
                    continue;
                };
                let (Some(site), Some(prefix)) = (marks.site, marks.prefix) else {
                    continue;
                };
                out.push(NetworkFound {
                    id: vpc.id.to_string(),
                    site,
                    prefix,
                    routed: true,
                });
            }
            Ok(out)
        })
    }

    fn create_network<'a>(
        &'a self,
        _site: &'a str,
        location: &'a str,
        prefix: Prefix,
        marks: &'a ResourceMarks,
    ) -> CloudOp<'a, String, SiteError> {
        Box::pin(async move {
            let network = prefix.network().to_string();
            let vpc = self
                .client
                .create_vpc(
                    &location.into(),
                    &resource_text(marks),
                    Some((network.as_str(), prefix.bits())),
                )
                .await?;
            Ok(vpc.id.to_string())
        })
    }

    fn add_default_route<'a>(
        &'a self,
        _network: &'a NetworkFound,
        _waits: Waits,
    ) -> CloudOp<'a, (), SiteError> {
        Box::pin(async { Ok(()) })
    }

    fn node_default_via(&self, prefix: Prefix) -> Ipv4Addr {
        prefix.gateway()
    }

    fn gateway_claims_address(&self) -> bool {
        true
    }

    fn attach_gateway_network<'a>(
        &'a self,
        _instance: &'a str,
        _network: &'a str,
        _address: Ipv4Addr,
        _waits: Waits,
    ) -> CloudOp<'a, bool, SiteError> {
        Box::pin(async { Ok(false) })
    }

    fn addresses<'a>(
        &'a self,
        ownership: &'a Ownership,
        kinds: &'a [ResourceKind],
        site: Option<&'a str>,
    ) -> CloudOp<'a, Vec<AddressFound>> {
        Box::pin(async move {
            let mut out = Vec::new();
            for reserved in self.client.list_reserved_ips().await? {
                if reserved.ip_type != "v4" {
                    continue;
                }
                let Some(marks) = resource_marks_of(&reserved.label) else {
                    continue;
                };
                if !kinds.contains(&marks.kind)
                    || !marks.owned_by(&ownership.child, &ownership.tags)
                {
                    continue;
                }
                let Some(marked_site) = marks.site.clone() else {
                    continue;
                };
                if site.is_some_and(|s| s != marked_site) {
                    continue;
                }
                out.push(AddressFound {
                    marks,
                    site: marked_site,
                    id: format!("vultr:{}", reserved.id),
                    location: reserved.region.to_string(),
                    attached_to: reserved.instance_id.as_ref().map(|i| format!("vultr:{i}")),
                    ip: reserved.subnet,
                    ptr: None,
                    description: None,
                });
            }
            Ok(out)
        })
    }

    fn create_stable<'a>(
        &'a self,
        _site: &'a str,
        location: &'a str,
        marks: &'a ResourceMarks,
    ) -> CloudOp<'a, StableAddress, SiteError> {
        Box::pin(async move {
            let created = self
                .client
                .create_reserved_ip(&location.into(), "v4", Some(&resource_text(marks)))
                .await?;
            Ok(StableAddress {
                id: format!("vultr:{}", created.id),
                ip: parse_v4(&created.subnet)?,
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
            self.client
                .update_reserved_ip_label(
                    &VultrReservedIpId::from(id_of(&address.id)),
                    &resource_text(marks),
                )
                .await?;
            Ok(())
        })
    }

    fn delete_stable<'a>(&'a self, address: &'a StableAddress) -> CloudOp<'a, (), SiteError> {
        Box::pin(async move {
            self.client
                .delete_reserved_ip(&VultrReservedIpId::from(id_of(&address.id)))
                .await?;
            Ok(())
        })
    }

    fn create_pool_address<'a>(
        &'a self,
        location: &'a str,
        _name: String,
        _pool: &'a str,
        marks: &'a ResourceMarks,
    ) -> CloudOp<'a, (String, String), SiteError> {
        Box::pin(async move {
            let ip = self
                .client
                .create_reserved_ip(&location.into(), "v4", Some(&resource_text(marks)))
                .await?;
            Ok((format!("vultr:{}", ip.id), ip.subnet))
        })
    }

    fn attach_pool_address<'a>(
        &'a self,
        address: &'a PoolAddressHeld,
        instance: &'a str,
        _waits: Waits,
    ) -> CloudOp<'a, (), SiteError> {
        Box::pin(async move {
            let id = VultrReservedIpId::from(id_of(&address.id));
            if address.attached_to.is_some() {
                match self.client.detach_reserved_ip(&id).await {
                    Ok(()) => {}
                    Err(e) if e.is_not_found() => {}
                    Err(e) => return Err(e.into()),
                }
            }
            self.client
                .attach_reserved_ip(&id, &VultrInstanceId::from(id_of(instance)))
                .await?;
            Ok(())
        })
    }

    fn delete_pool_address<'a>(
        &'a self,
        address: &'a PoolAddressHeld,
        _waits: Waits,
    ) -> CloudOp<'a, (), SiteError> {
        Box::pin(async move {
            let gone = |r: Result<(), CloudError>| match r {
                Ok(()) => Ok(()),
                Err(e) if e.is_not_found() => Ok(()),
                Err(e) => Err(SiteError::Cloud(e)),
            };
            let id = VultrReservedIpId::from(id_of(&address.id));
            if address.attached_to.is_some() {
                gone(self.client.detach_reserved_ip(&id).await)?;
            }
            gone(self.client.delete_reserved_ip(&id).await)
        })
    }

    fn read_reverse_dns<'a>(
        &'a self,
        addresses: &'a mut [SiteAddress],
    ) -> Pin<Box<dyn Future<Output = BTreeMap<Ipv4Addr, String>> + Send + 'a>> {
        Box::pin(async move {
            let mut failed = BTreeMap::new();
            let holders: BTreeSet<String> = addresses
                .iter()
                .filter(|a| a.cloud == CLOUD)
                .filter_map(|a| a.attached_to.clone())
                .collect();
            for holder in holders {
                let holds = |a: &SiteAddress| {
                    a.cloud == CLOUD && a.attached_to.as_deref() == Some(holder.as_str())
                };
                let instance = VultrInstanceId::from(id_of(&holder));
                match self.client.list_instance_ipv4(&instance).await {
                    Ok(listed) => {
                        let names: BTreeMap<String, String> =
                            listed.into_iter().map(|i| (i.ip, i.reverse)).collect();
                        for address in addresses.iter_mut().filter(|a| holds(a)) {
                            address.ptr = Some(
                                names
                                    .get(&address.ipv4.to_string())
                                    .cloned()
                                    .unwrap_or_default(),
                            );
                        }
                    }
                    Err(e) => {
                        for address in addresses.iter().filter(|a| holds(a)) {
                            failed.insert(address.ipv4, e.to_string());
                        }
                    }
                }
            }
            failed
        })
    }

    fn set_reverse_dns<'a>(&'a self, address: &'a SiteAddress, name: &'a str) -> CloudOp<'a, ()> {
        Box::pin(async move {
            let Some(holder) = &address.attached_to else {
                return Ok(());
            };
            let instance = VultrInstanceId::from(id_of(holder));
            self.client
                .set_reverse_ipv4(&instance, &address.ipv4.to_string(), name)
                .await
        })
    }

    fn sealed_keys<'a>(&'a self, ownership: &'a Ownership) -> CloudOp<'a, Vec<String>> {
        Box::pin(async move {
            Ok(self
                .client
                .list_ssh_keys()
                .await?
                .into_iter()
                .filter(|key| owned_marks(&key.name, ownership, ResourceKind::SealedKey).is_some())
                .map(|key| format!("vultr:{}", key.id))
                .collect())
        })
    }

    fn ensure_sealed_key<'a>(
        &'a self,
        marks: &'a ResourceMarks,
        _name: &'a str,
        public: &'a str,
    ) -> CloudOp<'a, String, SiteError> {
        Box::pin(async move {
            let found = self.client.list_ssh_keys().await?.into_iter().find(|k| {
                resource_marks_of(&k.name)
                    .is_some_and(|m| m.kind == ResourceKind::SealedKey && m == *marks)
            });
            match found {
                Some(key) => Ok(key.id.to_string()),
                None => Ok(self
                    .client
                    .create_ssh_key(&resource_text(marks), public)
                    .await?
                    .id
                    .to_string()),
            }
        })
    }

    fn node_disks<'a>(&'a self, node: &'a str, ownership: &'a Ownership) -> CloudOp<'a, Vec<Disk>> {
        Box::pin(async move {
            let mut out = Vec::new();
            for block in self.client.list_blocks().await? {
                if let Some(marks) = owned_marks(&block.label, ownership, ResourceKind::Disk)
                    && marks.node.as_deref() == Some(node)
                {
                    out.push(Disk {
                        id: format!("vultr:{}", block.id),
                        index: marks.disk.unwrap_or_default(),
                        attached_to: block.attached_to_instance.map(|i| format!("vultr:{i}")),
                    });
                }
            }
            Ok(out)
        })
    }

    fn create_disk<'a>(
        &'a self,
        instance: &'a str,
        location: &'a str,
        _name: String,
        size_gib: u32,
        marks: &'a ResourceMarks,
        _waits: Waits,
    ) -> CloudOp<'a, (), SiteError> {
        Box::pin(async move {
            let block = self
                .client
                .create_block(&CreateBlock {
                    region: location.into(),
                    size_gb: u64::from(size_gib),
                    label: Some(resource_text(marks)),
                    block_type: None,
                })
                .await?;
            self.client
                .attach_block(&block.id, &VultrInstanceId::from(id_of(instance)), true)
                .await?;
            Ok(())
        })
    }

    fn attach_disk<'a>(
        &'a self,
        disk: &'a Disk,
        instance: &'a str,
        _waits: Waits,
    ) -> CloudOp<'a, ()> {
        Box::pin(async move {
            self.client
                .attach_block(
                    &VultrBlockId::from(id_of(&disk.id)),
                    &VultrInstanceId::from(id_of(instance)),
                    true,
                )
                .await
        })
    }

    fn delete_disk<'a>(&'a self, disk: &'a Disk, _waits: Waits) -> CloudOp<'a, bool> {
        Box::pin(async move {
            let id = VultrBlockId::from(id_of(&disk.id));
            if disk.attached_to.is_some() {
                match self.client.detach_block(&id, true).await {
                    Ok(()) => {}
                    Err(e) if e.is_not_found() => {}
                    Err(e) => {
                        tracing::debug!(disk = %disk.id, error = %e, "detaching a block before its delete");
                    }
                }
            }
            self.client.delete_block(&id).await.map(|()| true)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use orc_common::Purpose;

    #[test]
    fn instance_marks_round_trip_as_tags() {
        let m = Marks {
            owner_tag: "orc-partner-vultr".into(),
            child: "zone-1".into(),
            node_id: "n-000000000010".into(),
            site: "us-east-b".into(),
            purpose: Purpose::Gateway,
            rate: None,
            account_monthly: "5".parse().unwrap(),
            pool: None,
            gateway_gen: Some("g1".into()),
        };
        let owned = vec!["old".to_string(), "orc-partner-vultr".to_string()];
        assert_eq!(marks_of(&tags(&m), &owned), Some(m.clone()));
        assert_eq!(marks_of(&tags(&m), &["other".into()]), None);
        assert_eq!(tags(&m)[0], "orc-partner-vultr", "the bare owner tag first");
    }

    #[test]
    fn site_resource_marks_round_trip_as_text() {
        let mut m = ResourceMarks::new("orc-partner-hetzner", "zone-1", ResourceKind::Network);
        m.site = Some("eu-central-a".into());
        m.prefix = Prefix::new(259);
        assert_eq!(
            resource_text(&m),
            "orc-owner=orc-partner-hetzner orc-partner-child=zone-1 orc-kind=network orc-site=eu-central-a orc-prefix=10.129.3.0/24"
        );
        assert_eq!(resource_marks_of(&resource_text(&m)), Some(m));
        let mut stable = ResourceMarks::new("t", "zone-1", ResourceKind::Stable);
        stable.closed_at = Some(Timestamp::from_unix_millis(1_700_000_000_123));
        stable.pool = Some(crate::naming::pool_label("a/b/c"));
        stable.node = Some("n-1".into());
        stable.disk = Some(2);
        assert_eq!(
            resource_marks_of(&resource_text(&stable)),
            Some(stable.clone())
        );
        assert_eq!(resource_marks_of("orc-owner=t orc-kind=network"), None);
        assert_eq!(resource_marks_of("Default VPC"), None);
        assert!(resource_marks_of("orc-owner=t orc-partner-child=c orc-kind=x").is_none());
    }

    #[test]
    fn the_endpoint_gets_its_version_once() {
        assert_eq!(
            base_url("https://api.vultr.com/"),
            "https://api.vultr.com/v2"
        );
        assert_eq!(base_url("http://127.0.0.1:9/v2"), "http://127.0.0.1:9/v2");
    }
}
