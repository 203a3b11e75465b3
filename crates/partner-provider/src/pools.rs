//! Public pools' addresses: one public IPv4 per public pool at its site (a cloud's
//! floating or reserved IP), marked with the pool and the site, attached to the site
//! gateway.
//!
//! Invariants: the address steps are serialised in this process, and where a cloud's
//! addresses have unique names a create that loses a race answers the winner, so a pool
//! holds at most one address per site; a cloud holds at most
//! `<cloud>_pool_ipv4_limit` of them (a public pool's first node is refused `no_capacity`
//! when its cloud is at the limit); an address is released when its pool has no node left
//! at the site. The gateway that is deployed takes every pool address of its site, so a
//! replaced gateway keeps them.
//!
//! Request costs: a public pool's node deploy adds one address listing (plus, the first
//! time, the create, a gateway lookup and the attach); a gateway deploy adds one listing
//! and one attach per address not on it yet; a destroy of a pool's node adds one listing of
//! the pool's addresses (and, when the pool holds one there, a listing of its nodes and the
//! unassign and delete of a released address).

use orc_common::Purpose;
use orc_partner::ids::Cloud;
use orc_partner::words;
use orc_proto as proto;

use crate::clouds::parse_v4;
use crate::instances::{self, Owned};
use crate::naming::{self, ResourceKind};
use crate::provider::{PartnerProvider, refused};
use crate::sites::{OpenSite, PoolAddressHeld, SiteError, is_uniqueness};
use crate::token::OfferToken;

impl PartnerProvider {
    /// Every pool address of this partner in `cloud`: one listing.
    pub async fn pool_addresses(&self, cloud: Cloud) -> Result<Vec<PoolAddressHeld>, SiteError> {
        let (Some(ownership), Some(ops)) = (
            self.shared.ownership.get(&cloud),
            self.shared.clients.get(cloud),
        ) else {
            return Ok(Vec::new());
        };
        let found = ops
            .addresses(ownership, &[ResourceKind::PoolAddress], None)
            .await?;
        Ok(found
            .into_iter()
            .filter_map(|a| {
                let pool_mark = a.marks.pool?;
                let ip = a.ip.parse().ok()?;
                let pool = naming::pool_from_label(&pool_mark).or_else(|| {
                    a.description
                        .as_deref()
                        .and_then(|d| d.strip_prefix("pool "))
                        .map(str::to_string)
                });
                Some(PoolAddressHeld {
                    pool_mark,
                    pool,
                    site: a.site,
                    id: a.id,
                    ip,
                    attached_to: a.attached_to,
                })
            })
            .collect())
    }

    /// Makes sure the public pool of `token` has its address at the token's site, attached
    /// to the site gateway when there is one.
    pub(crate) async fn ensure_pool_address(
        &self,
        token: &OfferToken,
        open: &OpenSite,
    ) -> Result<(), proto::Refusal> {
        let cloud = token.cloud;
        let pool_mark = naming::pool_label(&token.pool);
        let _addressing = self.shared.sites.addressing().await;
        let held = self
            .pool_addresses(cloud)
            .await
            .map_err(|e| self.pool_failure(token, &e))?;
        if let Some(address) = held
            .iter()
            .find(|a| a.pool_mark == pool_mark && a.site == token.site)
        {
            if address.attached_to.is_none() {
                self.attach_to_site_gateway(token, open, address)
                    .await
                    .map_err(|e| self.pool_failure(token, &e))?;
            }
            return Ok(());
        }
        let limit = self
            .shared
            .config
            .cloud(cloud)
            .map_or(0, |c| c.pool_ipv4_limit);
        if held.len() >= usize::try_from(limit).unwrap_or(usize::MAX) {
            tracing::info!(node = %token.node, site = %token.site, %cloud, limit, "The cloud holds as many pool addresses as pool_ipv4_limit allows; the public pool's node is not placed");
            return Err(refused(
                proto::RefusalKind::NoCapacity,
                words::no_capacity_pinned(&self.class_title(&token.class)),
            ));
        }
        let Some(mut marks) = self.resource_marks(cloud, ResourceKind::PoolAddress) else {
            return Err(self.pool_failure(token, &SiteError::NoClient(cloud)));
        };
        marks.site = Some(token.site.clone());
        marks.pool = Some(pool_mark.clone());
        let ops = self
            .cloud_ops(cloud)
            .map_err(|e| self.pool_failure(token, &e))?;
        let name = naming::scoped_name(
            "pool",
            &format!("{pool_mark}-{}", token.site),
            &marks.child,
            &marks.owner_tag,
        );
        let (id, ip) = match ops
            .create_pool_address(&token.location, name, &token.pool, &marks)
            .await
        {
            Ok(created) => created,
            Err(SiteError::Cloud(e)) if is_uniqueness(&e) => {
                let winner = self
                    .pool_addresses(cloud)
                    .await
                    .map_err(|e| self.pool_failure(token, &e))?
                    .into_iter()
                    .find(|a| a.pool_mark == pool_mark && a.site == token.site)
                    .ok_or_else(|| self.deploy_failure(token, &e))?;
                return self
                    .attach_to_site_gateway(token, open, &winner)
                    .await
                    .map_err(|e| self.pool_failure(token, &e));
            }
            Err(SiteError::Cloud(e)) => return Err(self.deploy_failure(token, &e)),
            Err(e) => return Err(self.pool_failure(token, &e)),
        };
        let created = PoolAddressHeld {
            pool_mark,
            pool: Some(token.pool.clone()),
            site: token.site.clone(),
            id,
            ip: parse_v4(&ip).map_err(|e| self.pool_failure(token, &e))?,
            attached_to: None,
        };
        tracing::info!(node = %token.node, site = %token.site, pool = %token.pool, address = %created.ip, "Reserved the public pool's address");
        self.attach_to_site_gateway(token, open, &created)
            .await
            .map_err(|e| self.pool_failure(token, &e))
    }

    fn pool_failure(&self, token: &OfferToken, error: &SiteError) -> proto::Refusal {
        match error {
            SiteError::Cloud(e) => self.deploy_failure(token, e),
            SiteError::NoClient(_)
            | SiteError::NoPrefix
            | SiteError::BadAddress(_)
            | SiteError::UnknownLocation(_) => {
                tracing::info!(node = %token.node, site = %token.site, error = %error, "The public pool's address could not be made ready");
                refused(
                    proto::RefusalKind::Failed,
                    words::could_not_create(&token.node, &token.site),
                )
            }
        }
    }

    /// Attaches `address` to the site's gateway, when one runs: one instance listing.
    async fn attach_to_site_gateway(
        &self,
        token: &OfferToken,
        open: &OpenSite,
        address: &PoolAddressHeld,
    ) -> Result<(), SiteError> {
        let Some(ownership) = self.shared.ownership.get(&open.cloud) else {
            return Ok(());
        };
        let at_site =
            instances::list_at_site(&self.shared.clients, open.cloud, &open.site, ownership)
                .await?;
        let Some(gateway) = at_site.iter().find(|o| {
            o.marks.purpose == Purpose::Gateway && o.state != orc_proto::InstanceState::Deleting
        }) else {
            return Ok(());
        };
        self.attach_address(address, gateway).await?;
        tracing::info!(node = %token.node, site = %open.site, address = %address.ip, "The pool's address is attached to the site gateway");
        Ok(())
    }

    /// Attaches every pool address of the gateway's site to the gateway (one listing, and
    /// one attach per address not on it).
    pub(crate) async fn attach_pool_addresses(
        &self,
        token: &OfferToken,
        gateway: &Owned,
        open: &OpenSite,
    ) -> Result<(), proto::Refusal> {
        let _addressing = self.shared.sites.addressing().await;
        let held = self
            .pool_addresses(open.cloud)
            .await
            .map_err(|e| self.pool_failure(token, &e))?;
        for address in held.iter().filter(|a| a.site == open.site) {
            if address.attached_to.as_deref() == Some(gateway.instance_ref.as_str()) {
                continue;
            }
            self.attach_address(address, gateway)
                .await
                .map_err(|e| self.pool_failure(token, &e))?;
            tracing::info!(node = %token.node, site = %open.site, address = %address.ip, "The gateway took a pool address of its site");
        }
        Ok(())
    }

    async fn attach_address(
        &self,
        address: &PoolAddressHeld,
        gateway: &Owned,
    ) -> Result<(), SiteError> {
        self.cloud_ops(gateway.cloud)?
            .attach_pool_address(address, &gateway.instance_ref, self.waits())
            .await
    }

    /// Releases the address of the pool with mark `pool_mark` at `site` when the pool has
    /// no node left there besides `gone` (instance refs just deleted).
    pub(crate) async fn release_pool_address_if_unused(
        &self,
        cloud: Cloud,
        pool_mark: &str,
        site: &str,
        gone: &[String],
    ) -> Result<(), SiteError> {
        let Some(ownership) = self.shared.ownership.get(&cloud) else {
            return Ok(());
        };
        let _addressing = self.shared.sites.addressing().await;
        let addresses: Vec<PoolAddressHeld> = self
            .pool_addresses(cloud)
            .await?
            .into_iter()
            .filter(|a| a.pool_mark == pool_mark && a.site == site)
            .collect();
        if addresses.is_empty() {
            return Ok(());
        }
        let members =
            instances::list_of_pool(&self.shared.clients, cloud, pool_mark, ownership).await?;
        let live = members.iter().any(|o| {
            o.marks.purpose == Purpose::Tenant
                && o.marks.site == site
                && o.state != orc_proto::InstanceState::Deleting
                && !gone.contains(&o.instance_ref)
        });
        if live {
            return Ok(());
        }
        for address in addresses {
            self.delete_pool_address(cloud, &address).await?;
            tracing::info!(site, address = %address.ip, "Released a pool address: its pool has no node left at the site");
        }
        Ok(())
    }

    async fn delete_pool_address(
        &self,
        cloud: Cloud,
        address: &PoolAddressHeld,
    ) -> Result<(), SiteError> {
        self.cloud_ops(cloud)?
            .delete_pool_address(address, self.waits())
            .await
    }
}
