//! The partner's instances in each cloud: finding them by node id, listing them by owner
//! tag, creating and deleting them, all through the HTTP clients.
//!
//! An instance is the partner's ([`Owned`]) only when its marks ([`crate::naming`]) carry
//! this partner's child tag and one of its owned tags; everything else in the account is
//! invisible here, so another installation's instances are never reported or touched.
//!
//! Request costs: a lookup by node id or a listing by owner tag is one paginated listing;
//! a delete is one request.

use std::net::IpAddr;

use orc_cloud::hetzner::{self, ServerFilter};
use orc_cloud::vultr::{self, InstanceFilter, InstanceStatus, PowerStatus};
use orc_cloud::{CloudError, HcloudServerId, HetznerClient, VultrClient, VultrInstanceId};
use orc_partner::ids::Cloud;
use orc_proto::NodeState;

use crate::clients::CloudClients;
use crate::naming::{CHILD_KEY, Marks, NODE_KEY, OWNER_KEY, POOL_KEY, SITE_KEY};

/// Which instances are the partner's: its child value and every owned tag of a cloud.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ownership {
    pub child: String,
    /// The current owner tag first, then the also-owned tags.
    pub tags: Vec<String>,
}

impl Ownership {
    fn admits(&self, marks: &Marks) -> bool {
        marks.child == self.child && self.tags.contains(&marks.owner_tag)
    }
}

/// One instance the partner holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owned {
    pub cloud: Cloud,
    pub marks: Marks,
    /// `hetzner:<server id>` or `vultr:<instance id>`.
    pub instance_ref: String,
    /// Public addresses known so far (Vultr shows none until the instance is up).
    pub addresses: Vec<IpAddr>,
    pub state: NodeState,
}

/// A Hetzner server's state in protocol terms.
fn hetzner_state(status: hetzner::ServerStatus) -> NodeState {
    match status {
        hetzner::ServerStatus::Running => NodeState::Running,
        hetzner::ServerStatus::Initializing
        | hetzner::ServerStatus::Starting
        | hetzner::ServerStatus::Migrating
        | hetzner::ServerStatus::Rebuilding
        | hetzner::ServerStatus::Unknown => NodeState::Provisioning,
        hetzner::ServerStatus::Stopping | hetzner::ServerStatus::Off => NodeState::Stopped,
        hetzner::ServerStatus::Deleting => NodeState::Deleting,
    }
}

/// A Vultr instance's state in protocol terms.
fn vultr_state(status: InstanceStatus, power: PowerStatus) -> NodeState {
    match (status, power) {
        (InstanceStatus::Active, PowerStatus::Running) => NodeState::Running,
        (InstanceStatus::Active, PowerStatus::Stopped)
        | (InstanceStatus::Suspended, PowerStatus::Running)
        | (InstanceStatus::Suspended, PowerStatus::Stopped)
        | (InstanceStatus::Suspended, PowerStatus::Unknown) => NodeState::Stopped,
        (InstanceStatus::Active, PowerStatus::Unknown)
        | (InstanceStatus::Pending, PowerStatus::Running)
        | (InstanceStatus::Pending, PowerStatus::Stopped)
        | (InstanceStatus::Pending, PowerStatus::Unknown)
        | (InstanceStatus::Resizing, PowerStatus::Running)
        | (InstanceStatus::Resizing, PowerStatus::Stopped)
        | (InstanceStatus::Resizing, PowerStatus::Unknown)
        | (InstanceStatus::Unknown, PowerStatus::Running)
        | (InstanceStatus::Unknown, PowerStatus::Stopped)
        | (InstanceStatus::Unknown, PowerStatus::Unknown) => NodeState::Provisioning,
    }
}

/// The server as the partner's instance, when it is one.
pub fn hetzner_owned(server: &hetzner::Server, ownership: &Ownership) -> Option<Owned> {
    let marks = Marks::from_hetzner(&server.labels)?;
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
        cloud: Cloud::Hetzner,
        marks,
        instance_ref: format!("hetzner:{}", server.id),
        addresses,
        state: hetzner_state(server.status),
    })
}

/// Vultr's placeholder for "no address yet".
fn vultr_address(main_ip: &str) -> Option<IpAddr> {
    let ip: IpAddr = main_ip.parse().ok()?;
    (!ip.is_unspecified()).then_some(ip)
}

/// The instance as the partner's, when it is one.
pub fn vultr_owned(instance: &vultr::Instance, ownership: &Ownership) -> Option<Owned> {
    let marks = Marks::from_vultr(&instance.tags, &ownership.tags)?;
    if !ownership.admits(&marks) {
        return None;
    }
    Some(Owned {
        cloud: Cloud::Vultr,
        marks,
        instance_ref: format!("vultr:{}", instance.id),
        addresses: vultr_address(&instance.main_ip).into_iter().collect(),
        state: vultr_state(instance.status, instance.power_status),
    })
}

/// The partner's instances in `cloud` whose mark `key` is `value`: on Hetzner a label
/// selector (with the child label), on Vultr the tag `vultr_tag`. One paginated listing.
async fn list_marked(
    clients: &CloudClients,
    cloud: Cloud,
    (key, value): (&str, &str),
    vultr_tag: String,
    ownership: &Ownership,
) -> Result<Vec<Owned>, CloudError> {
    match cloud {
        Cloud::Hetzner => {
            let Some(client) = &clients.hetzner else {
                return Ok(Vec::new());
            };
            let selector = format!("{key}={value},{CHILD_KEY}={}", ownership.child);
            hetzner_list(client, selector, ownership).await
        }
        Cloud::Vultr => {
            let Some(client) = &clients.vultr else {
                return Ok(Vec::new());
            };
            vultr_list(client, vultr_tag, ownership).await
        }
    }
}

/// The partner's instances of `node_id` in `cloud` (normally none or one): one listing.
pub async fn find_node(
    clients: &CloudClients,
    cloud: Cloud,
    node_id: &str,
    ownership: &Ownership,
) -> Result<Vec<Owned>, CloudError> {
    let tag = format!("{NODE_KEY}={node_id}");
    list_marked(clients, cloud, (NODE_KEY, node_id), tag, ownership).await
}

/// The partner's instances in `cloud` that carry owner `tag`: one paginated listing.
pub async fn list_by_tag(
    clients: &CloudClients,
    cloud: Cloud,
    tag: &str,
    ownership: &Ownership,
) -> Result<Vec<Owned>, CloudError> {
    list_marked(clients, cloud, (OWNER_KEY, tag), tag.to_string(), ownership).await
}

/// The partner's instances in `cloud` at `site` (tenant nodes and gateways): one listing.
pub async fn list_at_site(
    clients: &CloudClients,
    cloud: Cloud,
    site: &str,
    ownership: &Ownership,
) -> Result<Vec<Owned>, CloudError> {
    let tag = format!("{SITE_KEY}={site}");
    list_marked(clients, cloud, (SITE_KEY, site), tag, ownership).await
}

/// The partner's instances in `cloud` of the pool with mark `pool_mark`: one listing.
pub async fn list_of_pool(
    clients: &CloudClients,
    cloud: Cloud,
    pool_mark: &str,
    ownership: &Ownership,
) -> Result<Vec<Owned>, CloudError> {
    let tag = format!("{POOL_KEY}={pool_mark}");
    list_marked(clients, cloud, (POOL_KEY, pool_mark), tag, ownership).await
}

async fn hetzner_list(
    client: &HetznerClient,
    selector: String,
    ownership: &Ownership,
) -> Result<Vec<Owned>, CloudError> {
    let servers = client
        .list_servers(&ServerFilter {
            label_selector: Some(selector),
            ..ServerFilter::default()
        })
        .await?;
    Ok(servers
        .iter()
        .filter_map(|s| hetzner_owned(s, ownership))
        .collect())
}

async fn vultr_list(
    client: &VultrClient,
    tag: String,
    ownership: &Ownership,
) -> Result<Vec<Owned>, CloudError> {
    let instances = client
        .list_instances(&InstanceFilter {
            tag: Some(tag),
            ..InstanceFilter::default()
        })
        .await?;
    Ok(instances
        .iter()
        .filter_map(|i| vultr_owned(i, ownership))
        .collect())
}

/// A reference the partner cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("instance reference {0:?} is not one of the partner's")]
pub struct BadInstanceRef(pub String);

/// Deletes an instance by its reference; an instance that is already gone is success.
pub async fn delete(clients: &CloudClients, instance_ref: &str) -> Result<(), DeleteError> {
    let bad = || DeleteError::BadRef(BadInstanceRef(instance_ref.to_string()));
    let (cloud, id) = instance_ref.split_once(':').ok_or_else(bad)?;
    let result = match (cloud, &clients.hetzner, &clients.vultr) {
        ("hetzner", Some(client), _) => {
            let id: u64 = id.parse().map_err(|_| bad())?;
            client.delete_server(HcloudServerId(id)).await.map(|_| ())
        }
        ("vultr", _, Some(client)) => client.delete_instance(&VultrInstanceId::from(id)).await,
        _ => return Err(bad()),
    };
    match result {
        Ok(()) => Ok(()),
        Err(e) if e.is_not_found() => Ok(()),
        Err(e) => Err(DeleteError::Cloud(e)),
    }
}

/// Why a delete failed.
#[derive(Debug, thiserror::Error)]
pub enum DeleteError {
    #[error(transparent)]
    BadRef(BadInstanceRef),
    #[error("the cloud refused the delete")]
    Cloud(#[source] CloudError),
}
