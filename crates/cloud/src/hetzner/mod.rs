//! Hetzner Cloud API v1 client.
//!
//! Invariants: every listing follows `meta.pagination.next_page` with `per_page=50` (the
//! API's maximum) until the last page; a lookup of a missing resource answers `None`, any
//! other call on it fails with [`CloudError::NotFound`]; asynchronous work answers the
//! [`Action`]s to wait for, and [`HetznerClient::wait_for_actions`] polls them with
//! `GET /actions?id=…` in chunks of 25 ids, as Hetzner's own client does.

mod types;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use reqwest::Method;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::time::Instant;

pub use types::*;

use crate::counters::RequestCounters;
use crate::error::{CloudApi, CloudError};
use crate::ids::{
    HcloudActionId, HcloudFloatingIpId, HcloudImageId, HcloudNetworkId, HcloudPrimaryIpId,
    HcloudServerId, HcloudSshKeyId, HcloudVolumeId,
};
use crate::ratelimit::{AccountLimiter, RateQuota};
use crate::secret::Secret;
use crate::transport::{
    Auth, Call, ClientOptions, Transport, TransportHooks, absent_as_none, decode_value,
};

/// The public Hetzner Cloud endpoint.
pub const HETZNER_DEFAULT_URL: &str = "https://api.hetzner.cloud/v1";

/// Page size of every listing (the API's maximum).
pub const HETZNER_PER_PAGE: u32 = 50;

/// Ids per `GET /actions?id=…` request.
pub const HETZNER_ACTIONS_PER_REQUEST: usize = 25;

/// Largest `user_data` the API accepts (32 KiB).
pub const HETZNER_MAX_USER_DATA: usize = 32 * 1024;

/// How to reach one Hetzner Cloud project.
#[derive(Debug, Clone)]
pub struct HetznerConfig {
    /// `https://api.hetzner.cloud/v1` or an emulator's `http://ADDR/v1`.
    pub base_url: String,
    pub token: Secret,
    pub options: ClientOptions,
    /// Client-side budget of the project.
    pub quota: RateQuota,
}

impl HetznerConfig {
    /// The public endpoint with default options.
    pub fn new(token: impl Into<Secret>) -> Self {
        HetznerConfig {
            base_url: HETZNER_DEFAULT_URL.to_string(),
            token: token.into(),
            options: ClientOptions::default(),
            quota: RateQuota::HETZNER,
        }
    }

    /// Another endpoint (an emulator, a proxy).
    pub fn with_base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = base_url.into();
        self
    }
}

/// A Hetzner Cloud API client for one project. Clones share the rate limit and counters.
#[derive(Debug, Clone)]
pub struct HetznerClient {
    transport: Arc<Transport>,
}

/// An image given by id or by name (`ubuntu-24.04`, resolved for the server's architecture).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum ImageRef {
    Id(HcloudImageId),
    Name(String),
}

impl From<&str> for ImageRef {
    fn from(name: &str) -> Self {
        ImageRef::Name(name.to_string())
    }
}

impl From<HcloudImageId> for ImageRef {
    fn from(id: HcloudImageId) -> Self {
        ImageRef::Id(id)
    }
}

/// Public interfaces of a new server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PublicNetRequest {
    pub enable_ipv4: bool,
    pub enable_ipv6: bool,
    /// An existing unassigned primary IPv4 to use instead of a new one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv4: Option<HcloudPrimaryIpId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv6: Option<HcloudPrimaryIpId>,
}

impl Default for PublicNetRequest {
    fn default() -> Self {
        PublicNetRequest {
            enable_ipv4: true,
            enable_ipv6: true,
            ipv4: None,
            ipv6: None,
        }
    }
}

/// A server to create.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CreateServer {
    pub name: String,
    /// Server type name (`cx23`).
    pub server_type: String,
    pub image: ImageRef,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    pub labels: Labels,
    /// Cloud-init user data, at most 32 KiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ssh_keys: Vec<HcloudSshKeyId>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub networks: Vec<HcloudNetworkId>,
    pub public_net: PublicNetRequest,
    pub start_after_create: bool,
}

impl CreateServer {
    /// A server with both public families, no labels, started after create.
    pub fn new(
        name: impl Into<String>,
        server_type: impl Into<String>,
        image: impl Into<ImageRef>,
    ) -> Self {
        CreateServer {
            name: name.into(),
            server_type: server_type.into(),
            image: image.into(),
            location: None,
            labels: Labels::new(),
            user_data: None,
            ssh_keys: Vec::new(),
            networks: Vec::new(),
            public_net: PublicNetRequest::default(),
            start_after_create: true,
        }
    }
}

/// Filters of a server listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerFilter {
    /// Exact name.
    pub name: Option<String>,
    /// Label selector (`orc/node=n1,env!=test`).
    pub label_selector: Option<String>,
}

/// Filters of an image listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageFilter {
    pub kind: Option<ImageType>,
    pub architecture: Option<HcloudArchitecture>,
    pub label_selector: Option<String>,
    pub name: Option<String>,
}

/// Filters of an SSH key listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SshKeyFilter {
    pub name: Option<String>,
    pub fingerprint: Option<String>,
    pub label_selector: Option<String>,
}

/// A subnet of a new network.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SubnetRequest {
    #[serde(rename = "type")]
    pub kind: SubnetType,
    pub ip_range: String,
    pub network_zone: String,
}

/// A network to create.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CreateNetwork {
    pub name: String,
    /// The network's range, e.g. `10.0.0.0/16`.
    pub ip_range: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subnets: Vec<SubnetRequest>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<Route>,
    pub labels: Labels,
}

/// A primary IP to create, unassigned and kept when its server goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatePrimaryIp {
    pub name: String,
    pub kind: IpType,
    /// Location name (`fsn1`).
    pub location: String,
    pub labels: Labels,
    /// Deleted with the server it is assigned to; `false` keeps it.
    pub auto_delete: bool,
}

/// A floating IP to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateFloatingIp {
    pub kind: IpType,
    /// Location name (`fsn1`).
    pub home_location: String,
    pub name: Option<String>,
    pub description: Option<String>,
    pub labels: Labels,
}

/// Where a new volume goes: a location, or attached to a server at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumePlacement {
    Location(String),
    Server {
        server: HcloudServerId,
        automount: bool,
    },
}

/// A volume to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateVolume {
    pub name: String,
    /// Size in GB (at least 10).
    pub size_gb: u64,
    pub placement: VolumePlacement,
    /// `ext4` or `xfs`; unformatted when `None`.
    pub format: Option<String>,
    pub labels: Labels,
}

#[derive(serde::Deserialize)]
struct ActionEnvelope {
    action: Action,
}

impl HetznerClient {
    /// Builds a client; fails only on an unusable base URL.
    pub fn new(config: HetznerConfig) -> Result<Self, CloudError> {
        let transport = Transport::new(
            CloudApi::Hetzner,
            &config.base_url,
            Auth::Bearer(config.token),
            AccountLimiter::shared(config.quota),
            config.options,
        )?;
        Ok(HetznerClient {
            transport: Arc::new(transport),
        })
    }

    /// Builds a client whose token source or exchange is swapped by `hooks` (a token
    /// resolved on each request; recorded or replayed traffic).
    pub fn with_hooks(config: HetznerConfig, hooks: TransportHooks) -> Result<Self, CloudError> {
        let transport = Transport::with_hooks(
            CloudApi::Hetzner,
            &config.base_url,
            Auth::Bearer(config.token),
            AccountLimiter::shared(config.quota),
            config.options,
            hooks,
        )?;
        Ok(HetznerClient {
            transport: Arc::new(transport),
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

    /// A snapshot of [`HetznerClient::counters`].
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
        let mut page: u64 = 1;
        let mut out = Vec::new();
        loop {
            let mut call = Call::get(operation, path);
            call.query = query.clone();
            let call = call.query("page", page).query("per_page", HETZNER_PER_PAGE);
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
            match body
                .pointer("/meta/pagination/next_page")
                .and_then(Value::as_u64)
            {
                None => return Ok(out),
                Some(next) if next > page => page = next,
                Some(next) => {
                    return Err(CloudError::Protocol {
                        operation,
                        problem: format!("next_page {next} does not follow page {page}"),
                    });
                }
            }
        }
    }

    async fn action(&self, call: Call) -> Result<Action, CloudError> {
        let envelope: ActionEnvelope = self.transport.json(&call).await?;
        Ok(envelope.action)
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

    // ----- catalogue -----

    /// Every server type with its prices and availability per location.
    pub async fn list_server_types(&self) -> Result<Vec<ServerType>, CloudError> {
        self.list_all(
            "hetzner.server_types.list",
            "/server_types",
            "server_types",
            vec![],
        )
        .await
    }

    /// Every location.
    pub async fn list_locations(&self) -> Result<Vec<Location>, CloudError> {
        self.list_all("hetzner.locations.list", "/locations", "locations", vec![])
            .await
    }

    /// Images matching the filter.
    pub async fn list_images(&self, filter: &ImageFilter) -> Result<Vec<Image>, CloudError> {
        let mut query = Vec::new();
        if let Some(kind) = filter.kind {
            query.push(("type".to_string(), kind.as_str().to_string()));
        }
        if let Some(arch) = filter.architecture {
            query.push(("architecture".to_string(), arch.as_str().to_string()));
        }
        if let Some(selector) = &filter.label_selector {
            query.push(("label_selector".to_string(), selector.clone()));
        }
        if let Some(name) = &filter.name {
            query.push(("name".to_string(), name.clone()));
        }
        self.list_all("hetzner.images.list", "/images", "images", query)
            .await
    }

    /// The project's price list (currency, VAT, IP and volume prices).
    pub async fn pricing(&self) -> Result<Pricing, CloudError> {
        self.field(Call::get("hetzner.pricing.get", "/pricing"), "pricing")
            .await
    }

    // ----- servers -----

    /// Creates a server; wait for [`CreatedServer::action_ids`] before using it.
    pub async fn create_server(&self, request: &CreateServer) -> Result<CreatedServer, CloudError> {
        if let Some(user_data) = &request.user_data
            && user_data.len() > HETZNER_MAX_USER_DATA
        {
            return Err(CloudError::InvalidInput {
                what: "user_data",
                problem: format!(
                    "{} bytes, the API accepts at most {HETZNER_MAX_USER_DATA}",
                    user_data.len()
                ),
            });
        }
        let body = serde_json::to_value(request).map_err(|e| CloudError::InvalidInput {
            what: "server request",
            problem: e.to_string(),
        })?;
        let call = Call::new("hetzner.servers.create", Method::POST, "/servers").json(body);
        self.transport.json(&call).await
    }

    /// The server, or `None` when it does not exist.
    pub async fn get_server(&self, id: HcloudServerId) -> Result<Option<Server>, CloudError> {
        absent_as_none(
            self.field(
                Call::get("hetzner.servers.get", format!("/servers/{id}")),
                "server",
            )
            .await,
        )
    }

    /// Servers matching the filter, every page.
    pub async fn list_servers(&self, filter: &ServerFilter) -> Result<Vec<Server>, CloudError> {
        let mut query = Vec::new();
        if let Some(name) = &filter.name {
            query.push(("name".to_string(), name.clone()));
        }
        if let Some(selector) = &filter.label_selector {
            query.push(("label_selector".to_string(), selector.clone()));
        }
        self.list_all("hetzner.servers.list", "/servers", "servers", query)
            .await
    }

    /// Deletes a server; the action ends when it is gone.
    pub async fn delete_server(&self, id: HcloudServerId) -> Result<Action, CloudError> {
        self.action(Call::new(
            "hetzner.servers.delete",
            Method::DELETE,
            format!("/servers/{id}"),
        ))
        .await
    }

    async fn server_action(
        &self,
        operation: &'static str,
        id: HcloudServerId,
        name: &str,
    ) -> Result<Action, CloudError> {
        self.action(Call::new(
            operation,
            Method::POST,
            format!("/servers/{id}/actions/{name}"),
        ))
        .await
    }

    /// Powers a server on.
    pub async fn poweron_server(&self, id: HcloudServerId) -> Result<Action, CloudError> {
        self.server_action("hetzner.servers.poweron", id, "poweron")
            .await
    }

    /// Cuts a server's power (hard).
    pub async fn poweroff_server(&self, id: HcloudServerId) -> Result<Action, CloudError> {
        self.server_action("hetzner.servers.poweroff", id, "poweroff")
            .await
    }

    /// Sends an ACPI shutdown; success means the signal was sent.
    pub async fn shutdown_server(&self, id: HcloudServerId) -> Result<Action, CloudError> {
        self.server_action("hetzner.servers.shutdown", id, "shutdown")
            .await
    }

    /// Hard reset.
    pub async fn reset_server(&self, id: HcloudServerId) -> Result<Action, CloudError> {
        self.server_action("hetzner.servers.reset", id, "reset")
            .await
    }

    /// ACPI reboot.
    pub async fn reboot_server(&self, id: HcloudServerId) -> Result<Action, CloudError> {
        self.server_action("hetzner.servers.reboot", id, "reboot")
            .await
    }

    /// Reinstalls a server from an image, optionally with new user data.
    pub async fn rebuild_server(
        &self,
        id: HcloudServerId,
        image: &ImageRef,
        user_data: Option<&str>,
    ) -> Result<Rebuilt, CloudError> {
        let mut body = json!({ "image": image });
        if let Some(user_data) = user_data {
            body["user_data"] = Value::String(user_data.to_string());
        }
        let call = Call::new(
            "hetzner.servers.rebuild",
            Method::POST,
            format!("/servers/{id}/actions/rebuild"),
        )
        .json(body);
        self.transport.json(&call).await
    }

    /// Attaches a server to a network, at `ip` when given (else the network picks the
    /// lowest free address of the server's network zone).
    pub async fn attach_server_to_network(
        &self,
        id: HcloudServerId,
        network: HcloudNetworkId,
        ip: Option<&str>,
    ) -> Result<Action, CloudError> {
        let mut body = json!({ "network": network });
        if let Some(ip) = ip {
            body["ip"] = Value::String(ip.to_string());
        }
        self.action(
            Call::new(
                "hetzner.servers.attach_to_network",
                Method::POST,
                format!("/servers/{id}/actions/attach_to_network"),
            )
            .json(body),
        )
        .await
    }

    // ----- actions -----

    /// The actions with these ids (in chunks of 25 per request).
    pub async fn get_actions(&self, ids: &[HcloudActionId]) -> Result<Vec<Action>, CloudError> {
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(HETZNER_ACTIONS_PER_REQUEST) {
            let query = chunk
                .iter()
                .map(|id| ("id".to_string(), id.to_string()))
                .collect();
            let actions: Vec<Action> = self
                .list_all("hetzner.actions.get", "/actions", "actions", query)
                .await?;
            out.extend(actions);
        }
        Ok(out)
    }

    /// Polls the actions every `poll` until all succeeded, one failed
    /// ([`CloudError::ActionFailed`]) or `deadline` would pass before the next poll
    /// ([`CloudError::Deadline`]). Answers the finished actions in the order asked.
    pub async fn wait_for_actions(
        &self,
        ids: &[HcloudActionId],
        poll: Duration,
        deadline: Instant,
    ) -> Result<Vec<Action>, CloudError> {
        const OPERATION: &str = "hetzner.actions.wait";
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        loop {
            let actions = self.get_actions(ids).await?;
            let by_id: BTreeMap<HcloudActionId, &Action> =
                actions.iter().map(|a| (a.id, a)).collect();
            let mut pending = Vec::new();
            for id in ids {
                let action = by_id.get(id).ok_or_else(|| CloudError::NotFound {
                    operation: OPERATION,
                    path: format!("/actions?id={id}"),
                })?;
                match action.status {
                    ActionStatus::Success => {}
                    ActionStatus::Error => {
                        let (code, message) = action
                            .error
                            .as_ref()
                            .map(|e| (e.code.clone(), e.message.clone()))
                            .unwrap_or_else(|| ("unknown".into(), "no error given".into()));
                        return Err(CloudError::ActionFailed {
                            operation: OPERATION,
                            action: *id,
                            command: action.command.clone(),
                            code,
                            message,
                        });
                    }
                    ActionStatus::Running | ActionStatus::Unknown => pending.push(*id),
                }
            }
            if pending.is_empty() {
                return Ok(ids
                    .iter()
                    .filter_map(|id| by_id.get(id).map(|a| (*a).clone()))
                    .collect());
            }
            if Instant::now() + poll > deadline {
                return Err(CloudError::Deadline {
                    operation: OPERATION,
                    pending,
                });
            }
            tokio::time::sleep(poll).await;
        }
    }

    // ----- networks -----

    /// Creates a private network.
    pub async fn create_network(&self, request: &CreateNetwork) -> Result<Network, CloudError> {
        let body = serde_json::to_value(request).map_err(|e| CloudError::InvalidInput {
            what: "network request",
            problem: e.to_string(),
        })?;
        self.field(
            Call::new("hetzner.networks.create", Method::POST, "/networks").json(body),
            "network",
        )
        .await
    }

    /// The network, or `None`.
    pub async fn get_network(&self, id: HcloudNetworkId) -> Result<Option<Network>, CloudError> {
        absent_as_none(
            self.field(
                Call::get("hetzner.networks.get", format!("/networks/{id}")),
                "network",
            )
            .await,
        )
    }

    /// Networks, optionally by label selector.
    pub async fn list_networks(
        &self,
        label_selector: Option<&str>,
    ) -> Result<Vec<Network>, CloudError> {
        let query = selector_query(label_selector);
        self.list_all("hetzner.networks.list", "/networks", "networks", query)
            .await
    }

    /// Deletes a network.
    pub async fn delete_network(&self, id: HcloudNetworkId) -> Result<(), CloudError> {
        self.transport
            .unit(&Call::new(
                "hetzner.networks.delete",
                Method::DELETE,
                format!("/networks/{id}"),
            ))
            .await
    }

    /// Adds a route to a network.
    pub async fn add_route(
        &self,
        id: HcloudNetworkId,
        route: &Route,
    ) -> Result<Action, CloudError> {
        self.action(
            Call::new(
                "hetzner.networks.add_route",
                Method::POST,
                format!("/networks/{id}/actions/add_route"),
            )
            .json(json!({"destination": route.destination, "gateway": route.gateway})),
        )
        .await
    }

    /// Removes a route from a network.
    pub async fn delete_route(
        &self,
        id: HcloudNetworkId,
        route: &Route,
    ) -> Result<Action, CloudError> {
        self.action(
            Call::new(
                "hetzner.networks.delete_route",
                Method::POST,
                format!("/networks/{id}/actions/delete_route"),
            )
            .json(json!({"destination": route.destination, "gateway": route.gateway})),
        )
        .await
    }

    // ----- primary IPs -----

    /// Creates an unassigned primary IP in a location.
    pub async fn create_primary_ip(
        &self,
        request: &CreatePrimaryIp,
    ) -> Result<CreatedPrimaryIp, CloudError> {
        let body = json!({
            "name": request.name,
            "type": request.kind,
            "location": request.location,
            "assignee_type": "server",
            "auto_delete": request.auto_delete,
            "labels": request.labels,
        });
        self.transport
            .json(&Call::new("hetzner.primary_ips.create", Method::POST, "/primary_ips").json(body))
            .await
    }

    /// The primary IP, or `None`.
    pub async fn get_primary_ip(
        &self,
        id: HcloudPrimaryIpId,
    ) -> Result<Option<PrimaryIp>, CloudError> {
        absent_as_none(
            self.field(
                Call::get("hetzner.primary_ips.get", format!("/primary_ips/{id}")),
                "primary_ip",
            )
            .await,
        )
    }

    /// Primary IPs, optionally by label selector.
    pub async fn list_primary_ips(
        &self,
        label_selector: Option<&str>,
    ) -> Result<Vec<PrimaryIp>, CloudError> {
        self.list_all(
            "hetzner.primary_ips.list",
            "/primary_ips",
            "primary_ips",
            selector_query(label_selector),
        )
        .await
    }

    /// Assigns a primary IP to a (powered off) server.
    pub async fn assign_primary_ip(
        &self,
        id: HcloudPrimaryIpId,
        server: HcloudServerId,
    ) -> Result<Action, CloudError> {
        self.action(
            Call::new(
                "hetzner.primary_ips.assign",
                Method::POST,
                format!("/primary_ips/{id}/actions/assign"),
            )
            .json(json!({"assignee_type": "server", "assignee_id": server})),
        )
        .await
    }

    /// Takes a primary IP off its (powered off) server.
    pub async fn unassign_primary_ip(&self, id: HcloudPrimaryIpId) -> Result<Action, CloudError> {
        self.action(Call::new(
            "hetzner.primary_ips.unassign",
            Method::POST,
            format!("/primary_ips/{id}/actions/unassign"),
        ))
        .await
    }

    /// Sets (or with `None` resets) the reverse DNS of `ip`.
    pub async fn change_primary_ip_dns_ptr(
        &self,
        id: HcloudPrimaryIpId,
        ip: &str,
        dns_ptr: Option<&str>,
    ) -> Result<Action, CloudError> {
        self.action(
            Call::new(
                "hetzner.primary_ips.change_dns_ptr",
                Method::POST,
                format!("/primary_ips/{id}/actions/change_dns_ptr"),
            )
            .json(json!({"ip": ip, "dns_ptr": dns_ptr})),
        )
        .await
    }

    /// Replaces the labels of a primary IP.
    pub async fn update_primary_ip_labels(
        &self,
        id: HcloudPrimaryIpId,
        labels: &Labels,
    ) -> Result<PrimaryIp, CloudError> {
        self.field(
            Call::new(
                "hetzner.primary_ips.update",
                Method::PUT,
                format!("/primary_ips/{id}"),
            )
            .json(json!({ "labels": labels })),
            "primary_ip",
        )
        .await
    }

    /// Deletes an unassigned primary IP.
    pub async fn delete_primary_ip(&self, id: HcloudPrimaryIpId) -> Result<(), CloudError> {
        self.transport
            .unit(&Call::new(
                "hetzner.primary_ips.delete",
                Method::DELETE,
                format!("/primary_ips/{id}"),
            ))
            .await
    }

    // ----- floating IPs -----

    /// Creates a floating IP homed in a location.
    pub async fn create_floating_ip(
        &self,
        request: &CreateFloatingIp,
    ) -> Result<CreatedFloatingIp, CloudError> {
        let mut body = json!({
            "type": request.kind,
            "home_location": request.home_location,
            "labels": request.labels,
        });
        if let Some(name) = &request.name {
            body["name"] = Value::String(name.clone());
        }
        if let Some(description) = &request.description {
            body["description"] = Value::String(description.clone());
        }
        self.transport
            .json(
                &Call::new("hetzner.floating_ips.create", Method::POST, "/floating_ips").json(body),
            )
            .await
    }

    /// The floating IP, or `None`.
    pub async fn get_floating_ip(
        &self,
        id: HcloudFloatingIpId,
    ) -> Result<Option<FloatingIp>, CloudError> {
        absent_as_none(
            self.field(
                Call::get("hetzner.floating_ips.get", format!("/floating_ips/{id}")),
                "floating_ip",
            )
            .await,
        )
    }

    /// Floating IPs, optionally by label selector.
    pub async fn list_floating_ips(
        &self,
        label_selector: Option<&str>,
    ) -> Result<Vec<FloatingIp>, CloudError> {
        self.list_all(
            "hetzner.floating_ips.list",
            "/floating_ips",
            "floating_ips",
            selector_query(label_selector),
        )
        .await
    }

    /// Routes a floating IP to a server.
    pub async fn assign_floating_ip(
        &self,
        id: HcloudFloatingIpId,
        server: HcloudServerId,
    ) -> Result<Action, CloudError> {
        self.action(
            Call::new(
                "hetzner.floating_ips.assign",
                Method::POST,
                format!("/floating_ips/{id}/actions/assign"),
            )
            .json(json!({ "server": server })),
        )
        .await
    }

    /// Unroutes a floating IP.
    pub async fn unassign_floating_ip(&self, id: HcloudFloatingIpId) -> Result<Action, CloudError> {
        self.action(Call::new(
            "hetzner.floating_ips.unassign",
            Method::POST,
            format!("/floating_ips/{id}/actions/unassign"),
        ))
        .await
    }

    /// Sets (or with `None` resets) the reverse DNS of `ip`.
    pub async fn change_floating_ip_dns_ptr(
        &self,
        id: HcloudFloatingIpId,
        ip: &str,
        dns_ptr: Option<&str>,
    ) -> Result<Action, CloudError> {
        self.action(
            Call::new(
                "hetzner.floating_ips.change_dns_ptr",
                Method::POST,
                format!("/floating_ips/{id}/actions/change_dns_ptr"),
            )
            .json(json!({"ip": ip, "dns_ptr": dns_ptr})),
        )
        .await
    }

    /// Deletes an unassigned floating IP.
    pub async fn delete_floating_ip(&self, id: HcloudFloatingIpId) -> Result<(), CloudError> {
        self.transport
            .unit(&Call::new(
                "hetzner.floating_ips.delete",
                Method::DELETE,
                format!("/floating_ips/{id}"),
            ))
            .await
    }

    // ----- SSH keys -----

    /// Stores an SSH public key.
    pub async fn create_ssh_key(
        &self,
        name: &str,
        public_key: &str,
        labels: &Labels,
    ) -> Result<SshKey, CloudError> {
        self.field(
            Call::new("hetzner.ssh_keys.create", Method::POST, "/ssh_keys")
                .json(json!({"name": name, "public_key": public_key, "labels": labels})),
            "ssh_key",
        )
        .await
    }

    /// The SSH key, or `None`.
    pub async fn get_ssh_key(&self, id: HcloudSshKeyId) -> Result<Option<SshKey>, CloudError> {
        absent_as_none(
            self.field(
                Call::get("hetzner.ssh_keys.get", format!("/ssh_keys/{id}")),
                "ssh_key",
            )
            .await,
        )
    }

    /// SSH keys matching the filter.
    pub async fn list_ssh_keys(&self, filter: &SshKeyFilter) -> Result<Vec<SshKey>, CloudError> {
        let mut query = Vec::new();
        if let Some(name) = &filter.name {
            query.push(("name".to_string(), name.clone()));
        }
        if let Some(fingerprint) = &filter.fingerprint {
            query.push(("fingerprint".to_string(), fingerprint.clone()));
        }
        if let Some(selector) = &filter.label_selector {
            query.push(("label_selector".to_string(), selector.clone()));
        }
        self.list_all("hetzner.ssh_keys.list", "/ssh_keys", "ssh_keys", query)
            .await
    }

    /// Deletes an SSH key.
    pub async fn delete_ssh_key(&self, id: HcloudSshKeyId) -> Result<(), CloudError> {
        self.transport
            .unit(&Call::new(
                "hetzner.ssh_keys.delete",
                Method::DELETE,
                format!("/ssh_keys/{id}"),
            ))
            .await
    }

    // ----- volumes -----

    /// Creates a volume in a location or attached to a server.
    pub async fn create_volume(&self, request: &CreateVolume) -> Result<CreatedVolume, CloudError> {
        let mut body = json!({
            "name": request.name,
            "size": request.size_gb,
            "labels": request.labels,
        });
        match &request.placement {
            VolumePlacement::Location(location) => {
                body["location"] = Value::String(location.clone());
            }
            VolumePlacement::Server { server, automount } => {
                body["server"] = json!(server);
                body["automount"] = Value::Bool(*automount);
            }
        }
        if let Some(format) = &request.format {
            body["format"] = Value::String(format.clone());
        }
        self.transport
            .json(&Call::new("hetzner.volumes.create", Method::POST, "/volumes").json(body))
            .await
    }

    /// The volume, or `None`.
    pub async fn get_volume(&self, id: HcloudVolumeId) -> Result<Option<Volume>, CloudError> {
        absent_as_none(
            self.field(
                Call::get("hetzner.volumes.get", format!("/volumes/{id}")),
                "volume",
            )
            .await,
        )
    }

    /// Volumes, optionally by label selector.
    pub async fn list_volumes(
        &self,
        label_selector: Option<&str>,
    ) -> Result<Vec<Volume>, CloudError> {
        self.list_all(
            "hetzner.volumes.list",
            "/volumes",
            "volumes",
            selector_query(label_selector),
        )
        .await
    }

    /// Attaches a volume to a server in its location.
    pub async fn attach_volume(
        &self,
        id: HcloudVolumeId,
        server: HcloudServerId,
        automount: bool,
    ) -> Result<Action, CloudError> {
        self.action(
            Call::new(
                "hetzner.volumes.attach",
                Method::POST,
                format!("/volumes/{id}/actions/attach"),
            )
            .json(json!({"server": server, "automount": automount})),
        )
        .await
    }

    /// Detaches a volume from its server.
    pub async fn detach_volume(&self, id: HcloudVolumeId) -> Result<Action, CloudError> {
        self.action(Call::new(
            "hetzner.volumes.detach",
            Method::POST,
            format!("/volumes/{id}/actions/detach"),
        ))
        .await
    }

    /// Deletes a detached volume.
    pub async fn delete_volume(&self, id: HcloudVolumeId) -> Result<(), CloudError> {
        self.transport
            .unit(&Call::new(
                "hetzner.volumes.delete",
                Method::DELETE,
                format!("/volumes/{id}"),
            ))
            .await
    }
}

fn selector_query(label_selector: Option<&str>) -> Vec<(String, String)> {
    label_selector
        .map(|s| vec![("label_selector".to_string(), s.to_string())])
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_server_body_matches_the_api() {
        let mut request = CreateServer::new("n1", "cx23", "ubuntu-24.04");
        request.location = Some("fsn1".into());
        request.ssh_keys = vec![HcloudSshKeyId(7)];
        request.public_net.enable_ipv4 = false;
        request.start_after_create = false;
        request.labels.insert("orc/node".into(), "n1".into());
        let body = serde_json::to_value(&request).unwrap();
        assert_eq!(
            body,
            json!({
                "name": "n1", "server_type": "cx23", "image": "ubuntu-24.04",
                "location": "fsn1", "labels": {"orc/node": "n1"}, "ssh_keys": [7],
                "public_net": {"enable_ipv4": false, "enable_ipv6": true},
                "start_after_create": false,
            })
        );
        let by_id = CreateServer::new("n2", "cx23", HcloudImageId(5));
        assert_eq!(serde_json::to_value(&by_id).unwrap()["image"], json!(5));
    }

    #[test]
    fn the_client_debug_output_has_no_token() {
        let client = HetznerClient::new(HetznerConfig::new("very-secret-token")).unwrap();
        let debug = format!("{client:?}");
        assert!(!debug.contains("very-secret-token"), "{debug}");
        assert!(debug.contains("<redacted>"));
    }

    #[test]
    fn unusable_base_urls_are_refused() {
        for url in ["not a url", "ftp://x/v1", "https://user:pw@host/v1"] {
            let err = HetznerClient::new(HetznerConfig::new("t").with_base_url(url)).unwrap_err();
            assert!(
                matches!(
                    err,
                    CloudError::InvalidInput {
                        what: "base_url",
                        ..
                    }
                ),
                "{url}"
            );
            assert!(!err.to_string().contains("pw@"), "{err}");
        }
    }
}
