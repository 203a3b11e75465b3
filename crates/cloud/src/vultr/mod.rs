//! Vultr API v2 client.
//!
//! Invariants: every listing follows the `meta.links.next` cursor (empty on the last page)
//! with `per_page` up to 500; user data is base64-encoded here so callers pass plain text;
//! a lookup of a missing resource answers `None`, any other call on it fails with
//! [`CloudError::NotFound`]; a create refused because the plan is sold out in the region is
//! [`CloudError::NoCapacity`].

mod types;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use base64::Engine;
use reqwest::Method;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

pub use types::*;

use crate::counters::RequestCounters;
use crate::error::{CloudApi, CloudError};
use crate::ids::{
    VultrBlockId, VultrInstanceId, VultrOsId, VultrPlanId, VultrRegionId, VultrReservedIpId,
    VultrSshKeyId, VultrVpcId,
};
use crate::ratelimit::{AccountLimiter, RateQuota};
use crate::secret::Secret;
use crate::transport::{Auth, Call, ClientOptions, Transport, absent_as_none, decode_value};

/// The public Vultr endpoint (paths are below `/v2`).
pub const VULTR_DEFAULT_URL: &str = "https://api.vultr.com/v2";

/// The API's largest page.
pub const VULTR_MAX_PER_PAGE: u32 = 500;

/// How to reach one Vultr account.
#[derive(Debug, Clone)]
pub struct VultrConfig {
    /// `https://api.vultr.com/v2` or an emulator's `http://ADDR/v2`.
    pub base_url: String,
    pub api_key: Secret,
    pub options: ClientOptions,
    pub quota: RateQuota,
    /// Page size of listings (1 to 500).
    pub per_page: u32,
}

impl VultrConfig {
    /// The public endpoint with default options and 500 objects per page.
    pub fn new(api_key: impl Into<Secret>) -> Self {
        VultrConfig {
            base_url: VULTR_DEFAULT_URL.to_string(),
            api_key: api_key.into(),
            options: ClientOptions::default(),
            quota: RateQuota::VULTR,
            per_page: VULTR_MAX_PER_PAGE,
        }
    }

    /// Another endpoint (an emulator, a proxy).
    pub fn with_base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = base_url.into();
        self
    }
}

/// A Vultr API client for one account. Clones share the rate limit and counters.
#[derive(Debug, Clone)]
pub struct VultrClient {
    transport: Arc<Transport>,
    per_page: u32,
}

/// What a new instance boots from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InstanceSource {
    /// An operating system from [`VultrClient::list_os`].
    Os(VultrOsId),
    /// A marketplace image id.
    Image(String),
}

/// An instance to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateInstance {
    pub region: VultrRegionId,
    pub plan: VultrPlanId,
    pub source: InstanceSource,
    pub label: Option<String>,
    pub hostname: Option<String>,
    pub tags: Vec<String>,
    /// Plain text; the client base64-encodes it.
    pub user_data: Option<String>,
    pub attach_vpc: Vec<VultrVpcId>,
    pub enable_ipv6: bool,
    /// No public IPv4. The API honours this only with IPv6, so it turns IPv6 on.
    pub disable_public_ipv4: bool,
    pub sshkey_id: Vec<VultrSshKeyId>,
    /// A reserved IPv4 (of the same region, not attached) to use as the main address.
    pub reserved_ipv4: Option<VultrReservedIpId>,
}

impl CreateInstance {
    /// An instance with IPv4 only and no extras.
    pub fn new(
        region: impl Into<VultrRegionId>,
        plan: impl Into<VultrPlanId>,
        source: InstanceSource,
    ) -> Self {
        CreateInstance {
            region: region.into(),
            plan: plan.into(),
            source,
            label: None,
            hostname: None,
            tags: Vec::new(),
            user_data: None,
            attach_vpc: Vec::new(),
            enable_ipv6: false,
            disable_public_ipv4: false,
            sshkey_id: Vec::new(),
            reserved_ipv4: None,
        }
    }

    /// The JSON body the API expects.
    pub fn to_body(&self) -> Value {
        let mut body = json!({
            "region": self.region,
            "plan": self.plan,
        });
        match &self.source {
            InstanceSource::Os(id) => body["os_id"] = json!(id),
            InstanceSource::Image(id) => body["image_id"] = json!(id),
        }
        if let Some(label) = &self.label {
            body["label"] = json!(label);
        }
        if let Some(hostname) = &self.hostname {
            body["hostname"] = json!(hostname);
        }
        if !self.tags.is_empty() {
            body["tags"] = json!(self.tags);
        }
        if let Some(user_data) = &self.user_data {
            body["user_data"] =
                json!(base64::engine::general_purpose::STANDARD.encode(user_data.as_bytes()));
        }
        if !self.attach_vpc.is_empty() {
            body["attach_vpc"] = json!(self.attach_vpc);
        }
        if self.enable_ipv6 || self.disable_public_ipv4 {
            body["enable_ipv6"] = json!(true);
        }
        if self.disable_public_ipv4 {
            body["disable_public_ipv4"] = json!(true);
        }
        if !self.sshkey_id.is_empty() {
            body["sshkey_id"] = json!(self.sshkey_id);
        }
        if let Some(reserved) = &self.reserved_ipv4 {
            body["reserved_ipv4"] = json!(reserved);
        }
        body
    }
}

/// Filters of an instance listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstanceFilter {
    /// Instances carrying exactly this tag.
    pub tag: Option<String>,
    pub label: Option<String>,
    pub region: Option<VultrRegionId>,
}

/// A block storage volume to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateBlock {
    pub region: VultrRegionId,
    pub size_gb: u64,
    pub label: Option<String>,
    /// `high_perf` or `storage_opt`; the API's default when `None`.
    pub block_type: Option<String>,
}

impl VultrClient {
    /// Builds a client; fails only on an unusable base URL or page size.
    pub fn new(config: VultrConfig) -> Result<Self, CloudError> {
        if !(1..=VULTR_MAX_PER_PAGE).contains(&config.per_page) {
            return Err(CloudError::InvalidInput {
                what: "per_page",
                problem: format!("{} is not within 1..=500", config.per_page),
            });
        }
        let transport = Transport::new(
            CloudApi::Vultr,
            &config.base_url,
            Auth::Bearer(config.api_key),
            AccountLimiter::shared(config.quota),
            config.options,
        )?;
        Ok(VultrClient {
            transport: Arc::new(transport),
            per_page: config.per_page,
        })
    }

    /// The base URL requests go to.
    pub fn base_url(&self) -> &str {
        self.transport.base_url()
    }

    /// Requests sent so far, per operation (shared by clones).
    pub fn counters(&self) -> &RequestCounters {
        self.transport.counters()
    }

    /// A snapshot of [`VultrClient::counters`].
    pub fn request_counts(&self) -> BTreeMap<String, u64> {
        self.transport.counters().snapshot()
    }

    async fn list_all<T: DeserializeOwned>(
        &self,
        operation: &'static str,
        path: &str,
        key: &'static str,
        query: Vec<(String, String)>,
    ) -> Result<Vec<T>, CloudError> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        let mut seen = BTreeSet::new();
        loop {
            let mut call = Call::get(operation, path);
            call.query = query.clone();
            let call = call
                .query("per_page", self.per_page)
                .query_opt("cursor", cursor.as_deref());
            let mut body: Value = self.transport.json(&call).await?;
            let items = body
                .get_mut(key)
                .map(Value::take)
                .ok_or_else(|| CloudError::Protocol {
                    operation,
                    problem: format!("the answer has no `{key}` list"),
                })?;
            let items: Vec<T> = decode_value(operation, items)?;
            out.extend(items);
            let next = body
                .pointer("/meta/links/next")
                .and_then(Value::as_str)
                .unwrap_or("");
            if next.is_empty() {
                return Ok(out);
            }
            if !seen.insert(next.to_string()) {
                return Err(CloudError::Protocol {
                    operation,
                    problem: "the next cursor repeats an earlier one".into(),
                });
            }
            cursor = Some(next.to_string());
        }
    }

    async fn field<T: DeserializeOwned>(
        &self,
        call: Call,
        key: &'static str,
    ) -> Result<T, CloudError> {
        let operation = call.operation;
        let mut body: Value = self.transport.json(&call).await?;
        let value = body
            .get_mut(key)
            .map(Value::take)
            .ok_or_else(|| CloudError::Protocol {
                operation,
                problem: format!("the answer has no `{key}`"),
            })?;
        decode_value(operation, value)
    }

    async fn unit(
        &self,
        operation: &'static str,
        method: Method,
        path: String,
        body: Option<Value>,
    ) -> Result<(), CloudError> {
        let mut call = Call::new(operation, method, path);
        if let Some(body) = body {
            call = call.json(body);
        }
        self.transport.unit(&call).await
    }

    // ----- catalogue -----

    /// Plans of `kind` (`vc2`, `vhf`, …; every kind when `None`).
    pub async fn list_plans(&self, kind: Option<&str>) -> Result<Vec<Plan>, CloudError> {
        let query = kind
            .map(|k| vec![("type".to_string(), k.to_string())])
            .unwrap_or_default();
        self.list_all("vultr.plans.list", "/plans", "plans", query)
            .await
    }

    /// Every region.
    pub async fn list_regions(&self) -> Result<Vec<Region>, CloudError> {
        self.list_all("vultr.regions.list", "/regions", "regions", vec![])
            .await
    }

    /// Plans that can be ordered in `region` right now (live stock).
    pub async fn region_availability(
        &self,
        region: &VultrRegionId,
    ) -> Result<Vec<VultrPlanId>, CloudError> {
        self.field(
            Call::get(
                "vultr.regions.availability",
                format!("/regions/{region}/availability"),
            ),
            "available_plans",
        )
        .await
    }

    /// Every operating system.
    pub async fn list_os(&self) -> Result<Vec<Os>, CloudError> {
        self.list_all("vultr.os.list", "/os", "os", vec![]).await
    }

    /// The account's balance and permissions.
    pub async fn account(&self) -> Result<Account, CloudError> {
        self.field(Call::get("vultr.account.get", "/account"), "account")
            .await
    }

    // ----- instances -----

    /// Creates an instance (answers `pending`; poll [`VultrClient::get_instance`]).
    pub async fn create_instance(&self, request: &CreateInstance) -> Result<Instance, CloudError> {
        self.field(
            Call::new("vultr.instances.create", Method::POST, "/instances").json(request.to_body()),
            "instance",
        )
        .await
    }

    /// The instance, or `None`.
    pub async fn get_instance(&self, id: &VultrInstanceId) -> Result<Option<Instance>, CloudError> {
        absent_as_none(
            self.field(
                Call::get("vultr.instances.get", format!("/instances/{id}")),
                "instance",
            )
            .await,
        )
    }

    /// Instances matching the filter, every page.
    pub async fn list_instances(
        &self,
        filter: &InstanceFilter,
    ) -> Result<Vec<Instance>, CloudError> {
        let mut query = Vec::new();
        if let Some(tag) = &filter.tag {
            query.push(("tag".to_string(), tag.clone()));
        }
        if let Some(label) = &filter.label {
            query.push(("label".to_string(), label.clone()));
        }
        if let Some(region) = &filter.region {
            query.push(("region".to_string(), region.to_string()));
        }
        self.list_all("vultr.instances.list", "/instances", "instances", query)
            .await
    }

    /// Deletes an instance.
    pub async fn delete_instance(&self, id: &VultrInstanceId) -> Result<(), CloudError> {
        self.unit(
            "vultr.instances.delete",
            Method::DELETE,
            format!("/instances/{id}"),
            None,
        )
        .await
    }

    /// Powers an instance on.
    pub async fn start_instance(&self, id: &VultrInstanceId) -> Result<(), CloudError> {
        self.unit(
            "vultr.instances.start",
            Method::POST,
            format!("/instances/{id}/start"),
            None,
        )
        .await
    }

    /// Powers an instance off.
    pub async fn halt_instance(&self, id: &VultrInstanceId) -> Result<(), CloudError> {
        self.unit(
            "vultr.instances.halt",
            Method::POST,
            format!("/instances/{id}/halt"),
            None,
        )
        .await
    }

    /// Reboots an instance.
    pub async fn reboot_instance(&self, id: &VultrInstanceId) -> Result<(), CloudError> {
        self.unit(
            "vultr.instances.reboot",
            Method::POST,
            format!("/instances/{id}/reboot"),
            None,
        )
        .await
    }

    /// Reinstalls an instance's OS, optionally with a new hostname.
    pub async fn reinstall_instance(
        &self,
        id: &VultrInstanceId,
        hostname: Option<&str>,
    ) -> Result<Instance, CloudError> {
        let body = match hostname {
            Some(hostname) => json!({ "hostname": hostname }),
            None => json!({}),
        };
        self.field(
            Call::new(
                "vultr.instances.reinstall",
                Method::POST,
                format!("/instances/{id}/reinstall"),
            )
            .json(body),
            "instance",
        )
        .await
    }

    /// The instance's IPv4 addresses (main, secondary and reserved ones attached to it, and
    /// private ones) with their reverse DNS names, every page.
    pub async fn list_instance_ipv4(
        &self,
        id: &VultrInstanceId,
    ) -> Result<Vec<InstanceIpv4>, CloudError> {
        self.list_all(
            "vultr.instances.list_ipv4",
            &format!("/instances/{id}/ipv4"),
            "ipv4s",
            vec![],
        )
        .await
    }

    /// Sets the reverse DNS name of an IPv4 address of an instance (its main or a reserved
    /// one attached to it).
    pub async fn set_reverse_ipv4(
        &self,
        id: &VultrInstanceId,
        ip: &str,
        reverse: &str,
    ) -> Result<(), CloudError> {
        self.unit(
            "vultr.instances.reverse_ipv4",
            Method::POST,
            format!("/instances/{id}/ipv4/reverse"),
            Some(json!({"ip": ip, "reverse": reverse})),
        )
        .await
    }

    // ----- VPCs -----

    /// Creates a VPC; the API picks the subnet when `v4_subnet` is `None`.
    pub async fn create_vpc(
        &self,
        region: &VultrRegionId,
        description: &str,
        v4_subnet: Option<(&str, u8)>,
    ) -> Result<Vpc, CloudError> {
        let mut body = json!({"region": region, "description": description});
        if let Some((subnet, mask)) = v4_subnet {
            body["v4_subnet"] = json!(subnet);
            body["v4_subnet_mask"] = json!(mask);
        }
        self.field(
            Call::new("vultr.vpcs.create", Method::POST, "/vpcs").json(body),
            "vpc",
        )
        .await
    }

    /// The VPC, or `None`.
    pub async fn get_vpc(&self, id: &VultrVpcId) -> Result<Option<Vpc>, CloudError> {
        absent_as_none(
            self.field(Call::get("vultr.vpcs.get", format!("/vpcs/{id}")), "vpc")
                .await,
        )
    }

    /// Every VPC.
    pub async fn list_vpcs(&self) -> Result<Vec<Vpc>, CloudError> {
        self.list_all("vultr.vpcs.list", "/vpcs", "vpcs", vec![])
            .await
    }

    /// Deletes a VPC no instance is attached to.
    pub async fn delete_vpc(&self, id: &VultrVpcId) -> Result<(), CloudError> {
        self.unit(
            "vultr.vpcs.delete",
            Method::DELETE,
            format!("/vpcs/{id}"),
            None,
        )
        .await
    }

    // ----- reserved IPs -----

    /// Reserves an address (`ip_type` `v4` or `v6`) in a region.
    pub async fn create_reserved_ip(
        &self,
        region: &VultrRegionId,
        ip_type: &str,
        label: Option<&str>,
    ) -> Result<ReservedIp, CloudError> {
        let mut body = json!({"region": region, "ip_type": ip_type});
        if let Some(label) = label {
            body["label"] = json!(label);
        }
        self.field(
            Call::new("vultr.reserved_ips.create", Method::POST, "/reserved-ips").json(body),
            "reserved_ip",
        )
        .await
    }

    /// The reserved IP, or `None`.
    pub async fn get_reserved_ip(
        &self,
        id: &VultrReservedIpId,
    ) -> Result<Option<ReservedIp>, CloudError> {
        absent_as_none(
            self.field(
                Call::get("vultr.reserved_ips.get", format!("/reserved-ips/{id}")),
                "reserved_ip",
            )
            .await,
        )
    }

    /// Every reserved IP.
    pub async fn list_reserved_ips(&self) -> Result<Vec<ReservedIp>, CloudError> {
        self.list_all(
            "vultr.reserved_ips.list",
            "/reserved-ips",
            "reserved_ips",
            vec![],
        )
        .await
    }

    /// Sets a reserved IP's label.
    pub async fn update_reserved_ip_label(
        &self,
        id: &VultrReservedIpId,
        label: &str,
    ) -> Result<ReservedIp, CloudError> {
        self.field(
            Call::new(
                "vultr.reserved_ips.update",
                Method::PATCH,
                format!("/reserved-ips/{id}"),
            )
            .json(json!({ "label": label })),
            "reserved_ip",
        )
        .await
    }

    /// Attaches a reserved IP to an instance in its region.
    pub async fn attach_reserved_ip(
        &self,
        id: &VultrReservedIpId,
        instance: &VultrInstanceId,
    ) -> Result<(), CloudError> {
        self.unit(
            "vultr.reserved_ips.attach",
            Method::POST,
            format!("/reserved-ips/{id}/attach"),
            Some(json!({ "instance_id": instance })),
        )
        .await
    }

    /// Detaches a reserved IP from its instance.
    pub async fn detach_reserved_ip(&self, id: &VultrReservedIpId) -> Result<(), CloudError> {
        self.unit(
            "vultr.reserved_ips.detach",
            Method::POST,
            format!("/reserved-ips/{id}/detach"),
            None,
        )
        .await
    }

    /// Releases a reserved IP.
    pub async fn delete_reserved_ip(&self, id: &VultrReservedIpId) -> Result<(), CloudError> {
        self.unit(
            "vultr.reserved_ips.delete",
            Method::DELETE,
            format!("/reserved-ips/{id}"),
            None,
        )
        .await
    }

    // ----- SSH keys -----

    /// Stores an SSH public key.
    pub async fn create_ssh_key(&self, name: &str, ssh_key: &str) -> Result<SshKey, CloudError> {
        self.field(
            Call::new("vultr.ssh_keys.create", Method::POST, "/ssh-keys")
                .json(json!({"name": name, "ssh_key": ssh_key})),
            "ssh_key",
        )
        .await
    }

    /// The SSH key, or `None`.
    pub async fn get_ssh_key(&self, id: &VultrSshKeyId) -> Result<Option<SshKey>, CloudError> {
        absent_as_none(
            self.field(
                Call::get("vultr.ssh_keys.get", format!("/ssh-keys/{id}")),
                "ssh_key",
            )
            .await,
        )
    }

    /// Every SSH key.
    pub async fn list_ssh_keys(&self) -> Result<Vec<SshKey>, CloudError> {
        self.list_all("vultr.ssh_keys.list", "/ssh-keys", "ssh_keys", vec![])
            .await
    }

    /// Deletes an SSH key.
    pub async fn delete_ssh_key(&self, id: &VultrSshKeyId) -> Result<(), CloudError> {
        self.unit(
            "vultr.ssh_keys.delete",
            Method::DELETE,
            format!("/ssh-keys/{id}"),
            None,
        )
        .await
    }

    // ----- block storage -----

    /// Creates a block storage volume.
    pub async fn create_block(&self, request: &CreateBlock) -> Result<Block, CloudError> {
        let mut body = json!({"region": request.region, "size_gb": request.size_gb});
        if let Some(label) = &request.label {
            body["label"] = json!(label);
        }
        if let Some(block_type) = &request.block_type {
            body["block_type"] = json!(block_type);
        }
        self.field(
            Call::new("vultr.blocks.create", Method::POST, "/blocks").json(body),
            "block",
        )
        .await
    }

    /// The block volume, or `None`.
    pub async fn get_block(&self, id: &VultrBlockId) -> Result<Option<Block>, CloudError> {
        absent_as_none(
            self.field(
                Call::get("vultr.blocks.get", format!("/blocks/{id}")),
                "block",
            )
            .await,
        )
    }

    /// Every block volume.
    pub async fn list_blocks(&self) -> Result<Vec<Block>, CloudError> {
        self.list_all("vultr.blocks.list", "/blocks", "blocks", vec![])
            .await
    }

    /// Attaches a block volume to an instance (`live`: without restarting it).
    pub async fn attach_block(
        &self,
        id: &VultrBlockId,
        instance: &VultrInstanceId,
        live: bool,
    ) -> Result<(), CloudError> {
        self.unit(
            "vultr.blocks.attach",
            Method::POST,
            format!("/blocks/{id}/attach"),
            Some(json!({"instance_id": instance, "live": live})),
        )
        .await
    }

    /// Detaches a block volume (`live`: without restarting the instance).
    pub async fn detach_block(&self, id: &VultrBlockId, live: bool) -> Result<(), CloudError> {
        self.unit(
            "vultr.blocks.detach",
            Method::POST,
            format!("/blocks/{id}/detach"),
            Some(json!({ "live": live })),
        )
        .await
    }

    /// Deletes a detached block volume.
    pub async fn delete_block(&self, id: &VultrBlockId) -> Result<(), CloudError> {
        self.unit(
            "vultr.blocks.delete",
            Method::DELETE,
            format!("/blocks/{id}"),
            None,
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_body_encodes_user_data_and_turns_ipv6_on_without_ipv4() {
        let mut request =
            CreateInstance::new("fra", "vc2-1c-1gb", InstanceSource::Os(VultrOsId(2284)));
        request.user_data = Some("#cloud-config\n".into());
        request.disable_public_ipv4 = true;
        request.tags = vec!["orc".into()];
        request.attach_vpc = vec![VultrVpcId::from("v1")];
        let body = request.to_body();
        assert_eq!(
            body,
            json!({
                "region": "fra", "plan": "vc2-1c-1gb", "os_id": 2284,
                "tags": ["orc"], "user_data": "I2Nsb3VkLWNvbmZpZwo=",
                "attach_vpc": ["v1"], "enable_ipv6": true, "disable_public_ipv4": true,
            })
        );
    }

    #[test]
    fn page_size_is_bounded() {
        let mut config = VultrConfig::new("k");
        config.per_page = 501;
        assert!(VultrClient::new(config).is_err());
    }
}
