//! Destroys: a node's extra disks, then its instances (an absent node is a success), then
//! its site closed when no tenant node is left there and its pool's address released when
//! the pool has no node left there. A step that fails is retried by the zone; every step
//! finds what an earlier attempt left.

use orc_partner::quote::Purpose;
use orc_partner::words;
use orc_proto as proto;

use crate::instances::{self, Owned};
use crate::provider::{PartnerProvider, refused};

impl PartnerProvider {
    /// Destroys every instance and extra disk of a node (the body of `Provider::destroy`),
    /// then closes its site when its last tenant node ended and releases its pool's
    /// address when the pool has no node left there.
    pub(crate) async fn carry_out_destroy(&self, node_id: proto::NodeId) -> proto::DestroyResult {
        self.become_serving();
        let node = node_id.as_str().to_string();
        let shared = &self.shared;
        shared.quotes.release(&node);
        let mut site_of_failure = None;
        for cloud in shared.clients.keyed() {
            let Some(ownership) = shared.ownership.get(&cloud) else {
                continue;
            };
            let found = match instances::find_node(&shared.clients, cloud, &node, ownership).await {
                Ok(found) => found,
                Err(e) => {
                    tracing::info!(node = %node, %cloud, "The node's instances could not be looked up; the destroy will be retried");
                    tracing::debug!(node = %node, error = %e, "the cloud's answer");
                    site_of_failure = Some(None);
                    continue;
                }
            };
            let Some(first_site) = found.first().map(|o| o.marks.site.clone()) else {
                continue;
            };
            if found.iter().any(|o| o.marks.purpose == Purpose::Tenant)
                && let Err(e) = self.delete_disks(cloud, &node).await
            {
                tracing::info!(node = %node, site = %first_site, "The node's extra disks could not be deleted yet; the destroy will be retried");
                tracing::debug!(node = %node, error = %e, "the cloud's answer");
                site_of_failure = Some(Some(first_site));
                continue;
            }
            let mut deleted = Vec::new();
            for owned in &found {
                match self.delete_instance(owned).await {
                    Ok(()) => {
                        tracing::info!(node = %node, site = %owned.marks.site, instance = %owned.instance_ref, "The node's instance is deleted");
                        let purpose = owned.marks.purpose;
                        let usd = owned.marks.usd_monthly();
                        shared
                            .quotes
                            .with(|state| state.node_ended(cloud, purpose, usd));
                        shared.known.forget(&node);
                        deleted.push(owned.instance_ref.clone());
                    }
                    Err(e) => {
                        tracing::info!(node = %node, site = %owned.marks.site, "The node's instance could not be deleted; the destroy will be retried");
                        tracing::debug!(node = %node, error = %e, "the cloud's answer");
                        site_of_failure = Some(Some(owned.marks.site.clone()));
                    }
                }
            }
            if deleted.len() != found.len() {
                continue;
            }
            for owned in &found {
                let at = self.shared.now();
                if let Err(e) = self
                    .close_site_if_empty(
                        cloud,
                        &owned.marks.site,
                        &deleted,
                        owned.marks.purpose,
                        at,
                    )
                    .await
                {
                    tracing::info!(node = %node, site = %owned.marks.site, "Whether the site is now empty could not be read; the destroy will be retried");
                    tracing::debug!(node = %node, error = %e, "the cloud's answer");
                    site_of_failure = Some(Some(owned.marks.site.clone()));
                }
                if owned.marks.purpose == Purpose::Tenant
                    && let Some(pool_mark) = &owned.marks.pool
                    && let Err(e) = self
                        .release_pool_address_if_unused(
                            cloud,
                            pool_mark,
                            &owned.marks.site,
                            &deleted,
                        )
                        .await
                {
                    tracing::info!(node = %node, site = %owned.marks.site, "The pool's address could not be released yet; the destroy will be retried");
                    tracing::debug!(node = %node, error = %e, "the cloud's answer");
                    site_of_failure = Some(Some(owned.marks.site.clone()));
                }
            }
        }
        match site_of_failure {
            None => proto::DestroyResult::Destroyed,
            Some(site) => {
                let title = site
                    .and_then(|s| {
                        shared
                            .config
                            .regions
                            .site(&s)
                            .map(|(class, _)| class.clone())
                    })
                    .map_or_else(
                        || "its region".to_string(),
                        |c| self.class_title(c.as_str()),
                    );
                proto::DestroyResult::Refused(refused(
                    proto::RefusalKind::Transient,
                    words::could_not_finish(&title),
                ))
            }
        }
    }

    /// Deletes an instance (already gone is success).
    async fn delete_instance(&self, owned: &Owned) -> Result<(), instances::DeleteError> {
        instances::delete(&self.shared.clients, &owned.instance_ref).await
    }
}
