//! The partner's instances in each cloud: finding them by node id, listing them by mark,
//! deleting them, through each cloud's `crate::clouds::CloudOps`.
//!
//! An instance is the partner's ([`Owned`]) only when its marks ([`crate::naming`]) carry
//! this partner's child tag and one of its owned tags; everything else in the account is
//! invisible here, so another installation's instances are never reported or touched.
//!
//! Request costs: a lookup by node id or a listing by owner tag is one paginated listing;
//! a delete is one request.

use std::net::IpAddr;

use orc_cloud::CloudError;
use orc_common::FaultClass;
use orc_partner::ids::Cloud;
use orc_proto::InstanceState;

use crate::clients::CloudClients;
use crate::clouds::{Held, Mark};
use crate::naming::{Marks, NODE_KEY, OWNER_KEY, POOL_KEY, SITE_KEY};

/// Which instances are the partner's: its child value and every owned tag of a cloud.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ownership {
    pub child: String,
    /// The current owner tag first, then the also-owned tags.
    pub tags: Vec<String>,
}

impl Ownership {
    /// Whether `marks` carry this partner's child value and one of its owned tags.
    pub fn admits(&self, marks: &Marks) -> bool {
        marks.child == self.child && self.tags.contains(&marks.owner_tag)
    }
}

/// One instance the partner holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owned {
    pub cloud: Cloud,
    pub marks: Marks,
    /// `<cloud>:<instance id>` (`hetzner:42`).
    pub instance_ref: String,
    /// Public addresses known so far (some clouds show none until the instance is up).
    pub addresses: Vec<IpAddr>,
    /// The address on the site's private network, once the cloud shows it.
    pub private: Option<IpAddr>,
    pub state: InstanceState,
}

/// The partner's instances in `cloud` with `mark`, with their locations: one listing.
pub(crate) async fn list_held(
    clients: &CloudClients,
    cloud: Cloud,
    mark: Mark<'_>,
    ownership: &Ownership,
) -> Result<Vec<Held>, CloudError> {
    match clients.get(cloud) {
        Some(ops) => ops.list_instances(mark, ownership).await,
        None => Ok(Vec::new()),
    }
}

async fn list_marked(
    clients: &CloudClients,
    cloud: Cloud,
    mark: Mark<'_>,
    ownership: &Ownership,
) -> Result<Vec<Owned>, CloudError> {
    let held = list_held(clients, cloud, mark, ownership).await?;
    Ok(held.into_iter().map(|h| h.owned).collect())
}

/// The partner's instances of `node_id` in `cloud` (normally none or one): one listing.
pub async fn find_node(
    clients: &CloudClients,
    cloud: Cloud,
    node_id: &str,
    ownership: &Ownership,
) -> Result<Vec<Owned>, CloudError> {
    list_marked(clients, cloud, (NODE_KEY, node_id), ownership).await
}

/// The partner's instances in `cloud` that carry owner `tag`: one paginated listing.
pub async fn list_by_tag(
    clients: &CloudClients,
    cloud: Cloud,
    tag: &str,
    ownership: &Ownership,
) -> Result<Vec<Owned>, CloudError> {
    list_marked(clients, cloud, (OWNER_KEY, tag), ownership).await
}

/// The partner's instances in `cloud` at `site` (tenant nodes and gateways): one listing.
pub async fn list_at_site(
    clients: &CloudClients,
    cloud: Cloud,
    site: &str,
    ownership: &Ownership,
) -> Result<Vec<Owned>, CloudError> {
    list_marked(clients, cloud, (SITE_KEY, site), ownership).await
}

/// The partner's instances in `cloud` of the pool with mark `pool_mark`: one listing.
pub async fn list_of_pool(
    clients: &CloudClients,
    cloud: Cloud,
    pool_mark: &str,
    ownership: &Ownership,
) -> Result<Vec<Owned>, CloudError> {
    list_marked(clients, cloud, (POOL_KEY, pool_mark), ownership).await
}

/// A reference the partner cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("instance reference {0:?} is not one of the partner's")]
pub struct BadInstanceRef(pub String);

/// Deletes an instance by its reference; an instance that is already gone is success.
pub async fn delete(clients: &CloudClients, instance_ref: &str) -> Result<(), DeleteError> {
    let Some((ops, id)) = clients.for_ref(instance_ref) else {
        return Err(DeleteError::BadRef(BadInstanceRef(
            instance_ref.to_string(),
        )));
    };
    match ops.delete_instance(id).await {
        Ok(()) => Ok(()),
        Err(e) if e.is_not_found() => Ok(()),
        Err(e) if e.class() == FaultClass::InvalidInput => Err(DeleteError::BadRef(
            BadInstanceRef(instance_ref.to_string()),
        )),
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
