//! A tenant node's extra disks, marked with the node id and their index among its disks
//! ([`crate::naming::ResourceKind::Disk`]).
//!
//! Invariants: a deploy creates only the disks the node does not hold yet and attaches any
//! that came loose, so a retried deploy leaves one disk per index; a destroy deletes the
//! disks before the instance, so a destroy that fails half-way still finds the instance on
//! retry.
//!
//! Request costs: one listing; per missing disk one create (and an attach where the cloud's
//! create does not attach); per attached disk on destroy a detach (and its poll where the
//! cloud has actions) and per disk a delete.

use orc_cloud::CloudError;
use orc_partner::ids::Cloud;
use orc_proto as proto;

use crate::clouds::Disk;
use crate::instances::Owned;
use crate::naming::{self, ResourceKind};
use crate::provider::PartnerProvider;
use crate::sites::SiteError;
use crate::token::OfferToken;

impl PartnerProvider {
    /// Creates the node's missing extra disks, attached to it.
    pub(super) async fn ensure_disks(
        &self,
        token: &OfferToken,
        owned: &Owned,
    ) -> Result<(), proto::Refusal> {
        let Some(mut marks) = self.resource_marks(owned.cloud, ResourceKind::Disk) else {
            return Err(self.needs_operator(token));
        };
        let ops = self
            .cloud_ops(owned.cloud)
            .map_err(|e| self.site_failure(token, &e))?;
        marks.node = Some(token.node.clone());
        let held = self
            .node_disks(owned.cloud, &token.node)
            .await
            .map_err(|e| self.deploy_failure(token, &e))?;
        for (index, size) in token.disks_gib.iter().enumerate() {
            let index = u32::try_from(index).unwrap_or(u32::MAX);
            if held.iter().any(|d| d.index == index) {
                continue;
            }
            marks.disk = Some(index);
            let name = format!("{}-d{index}", naming::hostname(&token.node));
            match ops
                .create_disk(
                    &owned.instance_ref,
                    &token.location,
                    name,
                    *size,
                    &marks,
                    self.waits(),
                )
                .await
            {
                Ok(()) => {}
                Err(SiteError::BadAddress(_)) => return Err(self.failed(token)),
                Err(e) => return Err(self.site_failure(token, &e)),
            }
            tracing::info!(node = %token.node, site = %token.site, disk = index, size_gib = size, "Created the node's extra disk");
        }
        for disk in held.iter().filter(|d| d.attached_to.is_none()) {
            ops.attach_disk(disk, &owned.instance_ref, self.waits())
                .await
                .map_err(|e| self.deploy_failure(token, &e))?;
        }
        Ok(())
    }

    /// The extra disks of `node` in `cloud`: one listing.
    async fn node_disks(&self, cloud: Cloud, node: &str) -> Result<Vec<Disk>, CloudError> {
        let (Some(ownership), Some(ops)) = (
            self.shared.ownership.get(&cloud),
            self.shared.clients.get(cloud),
        ) else {
            return Ok(Vec::new());
        };
        ops.node_disks(node, ownership).await
    }

    /// Deletes the node's extra disks in `cloud` before its instance.
    pub(super) async fn delete_disks(&self, cloud: Cloud, node: &str) -> Result<(), CloudError> {
        let Some(ops) = self.shared.clients.get(cloud) else {
            return Ok(());
        };
        for disk in self.node_disks(cloud, node).await? {
            match ops.delete_disk(&disk, self.waits()).await {
                Ok(true) => {
                    tracing::info!(node, disk = disk.index, "The node's extra disk is deleted")
                }
                Ok(false) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}
