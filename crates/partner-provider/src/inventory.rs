//! The inventory pass: the complete list of the partner's instances and sites, read from
//! every keyed cloud by its owned tags, or nothing at all when any cloud cannot be listed
//! (a partial list would make the zone declare nodes lost).

use std::collections::{BTreeMap, BTreeSet};

use orc_partner::ids::SiteName;
use orc_proto as proto;

use std::sync::Mutex;

use crate::instances::{self, Owned};
use crate::provider::{PartnerProvider, lock};

/// What the inventory pass remembers from one pass to the next (held in the provider's
/// shared state): which live sites the guard has already logged, which addresses' reverse
/// DNS still has to be set, and which clouds' addresses could not be listed last pass.
#[allow(dead_code, reason = "read once the provider's shared state holds it")]
#[derive(Debug, Default)]
pub(crate) struct InventoryState {
    pub(crate) memory: Mutex<PassMemory>,
}

/// The contents of [`InventoryState`], behind its lock.
#[allow(dead_code, reason = "read once the provider's shared state holds it")]
#[derive(Debug, Default, Clone)]
pub(crate) struct PassMemory {
    /// Live sites the map now puts elsewhere, already logged once (site → where it is live).
    pub(crate) guard_logged: BTreeMap<String, String>,
    /// Addresses whose reverse DNS could not be set last pass (address → wanted name).
    pub(crate) rdns_retry: BTreeMap<String, String>,
    /// Clouds whose addresses could not be listed in the last pass.
    pub(crate) unlisted_clouds: BTreeSet<String>,
}

impl PartnerProvider {
    /// Every instance the partner holds, or `None` when any cloud cannot be listed: one
    /// paginated listing per cloud per owned tag.
    pub async fn list_everything(&self) -> Option<Vec<Owned>> {
        let shared = &self.shared;
        let mut all: BTreeMap<String, Owned> = BTreeMap::new();
        for cloud in shared.clients.keyed() {
            let Some(ownership) = shared.ownership.get(&cloud) else {
                continue;
            };
            for tag in &ownership.tags {
                match instances::list_by_tag(&shared.clients, cloud, tag, ownership).await {
                    Ok(found) => {
                        for owned in found {
                            all.insert(owned.instance_ref.clone(), owned);
                        }
                    }
                    Err(e) => {
                        tracing::warn!(%cloud, "One cloud's inventory could not be read; no inventory is sent this pass, so no node is declared lost");
                        tracing::debug!(%cloud, error = %e, "the cloud's answer");
                        return None;
                    }
                }
            }
        }
        Some(all.into_values().collect())
    }

    pub(crate) async fn report_inventory(&self) -> Option<proto::Inventory> {
        self.become_serving();
        let everything = self.list_everything().await?;
        let mut nodes = Vec::new();
        let mut sites = BTreeSet::new();
        let mut known = BTreeMap::new();
        for owned in &everything {
            let (Ok(node_id), Ok(site), Ok(instance_ref)) = (
                proto::NodeId::new(owned.marks.node_id.as_str()),
                proto::SiteName::new(owned.marks.site.as_str()),
                proto::InstanceRef::new(owned.instance_ref.as_str()),
            ) else {
                continue;
            };
            known.insert(
                owned.marks.node_id.clone(),
                SiteName::new(owned.marks.site.as_str()),
            );
            sites.insert(owned.marks.site.clone());
            nodes.push(proto::InventoryNode {
                node_id,
                site,
                instance_ref,
                state: owned.state,
            });
        }
        *lock(&self.shared.known) = known;
        nodes.sort_by(|a, b| a.node_id.as_str().cmp(b.node_id.as_str()));
        let sites = sites
            .into_iter()
            .filter_map(|s| proto::SiteName::new(s).ok())
            .map(|site| proto::InventorySite {
                site,
                public_ipv4: None,
                private_prefix: None,
            })
            .collect();
        Some(proto::Inventory {
            nodes,
            sites,
            pool_addresses: Vec::new(),
        })
    }
}
