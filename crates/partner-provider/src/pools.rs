//! Public pools' addresses: one public IPv4 per public pool at its site (Hetzner floating
//! IP, Vultr reserved IP), marked with the pool and the site, attached to the site gateway.
//!
//! Invariants: the address steps are serialised in this process, and a Hetzner address's
//! name is unique, so a pool holds at most one address per site; a cloud holds at most
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

use orc_cloud::hetzner::{CreateFloatingIp, IpType};
use orc_cloud::{
    CloudError, HcloudFloatingIpId, HcloudServerId, VultrInstanceId, VultrReservedIpId,
};
use orc_partner::ids::Cloud;
use orc_partner::words;
use orc_proto as proto;

use crate::instances::{self, Owned};
use crate::naming::{self, ResourceKind, ResourceMarks, Role};
use crate::provider::{PartnerProvider, refused};
use crate::sites::{OpenSite, PoolAddressHeld, SiteError};
use crate::token::OfferToken;

fn id_of(reference: &str) -> &str {
    reference.split_once(':').map_or(reference, |(_, id)| id)
}

impl PartnerProvider {
    /// Every pool address of this partner in `cloud`: one listing.
    pub async fn pool_addresses(&self, cloud: Cloud) -> Result<Vec<PoolAddressHeld>, SiteError> {
        let Some(ownership) = self.shared.ownership.get(&cloud) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        match cloud {
            Cloud::Hetzner => {
                let Some(client) = &self.shared.clients.hetzner else {
                    return Ok(out);
                };
                let selector = format!(
                    "{}={},{}={}",
                    naming::CHILD_KEY,
                    ownership.child,
                    naming::KIND_KEY,
                    ResourceKind::PoolAddress.as_str()
                );
                for ip in client.list_floating_ips(Some(&selector)).await? {
                    let Some(marks) = ResourceMarks::from_hetzner(&ip.labels) else {
                        continue;
                    };
                    if !marks.owned_by(&ownership.child, &ownership.tags) {
                        continue;
                    }
                    let (Some(site), Some(pool_mark)) = (marks.site, marks.pool) else {
                        continue;
                    };
                    let Ok(address) = ip.ip.parse() else {
                        continue;
                    };
                    let pool = naming::pool_from_label(&pool_mark).or_else(|| {
                        ip.description
                            .as_deref()
                            .and_then(|d| d.strip_prefix("pool "))
                            .map(str::to_string)
                    });
                    out.push(PoolAddressHeld {
                        pool_mark,
                        pool,
                        site,
                        id: format!("hetzner:{}", ip.id),
                        ip: address,
                        attached_to: ip.server.map(|s| format!("hetzner:{s}")),
                    });
                }
            }
            Cloud::Vultr => {
                let Some(client) = &self.shared.clients.vultr else {
                    return Ok(out);
                };
                for ip in client.list_reserved_ips().await? {
                    let Some(marks) = ResourceMarks::from_vultr(&ip.label) else {
                        continue;
                    };
                    if marks.kind != ResourceKind::PoolAddress
                        || !marks.owned_by(&ownership.child, &ownership.tags)
                    {
                        continue;
                    }
                    let (Some(site), Some(pool_mark)) = (marks.site, marks.pool) else {
                        continue;
                    };
                    let Ok(address) = ip.subnet.parse() else {
                        continue;
                    };
                    out.push(PoolAddressHeld {
                        pool: naming::pool_from_label(&pool_mark),
                        pool_mark,
                        site,
                        id: format!("vultr:{}", ip.id),
                        ip: address,
                        attached_to: ip.instance_id.map(|i| format!("vultr:{i}")),
                    });
                }
            }
        }
        Ok(out)
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
        let _addressing = self.shared.sites.addressing.lock().await;
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
        let created = match cloud {
            Cloud::Hetzner => {
                let Some(client) = &self.shared.clients.hetzner else {
                    return Err(self.pool_failure(token, &SiteError::NoClient(cloud)));
                };
                let created = client
                    .create_floating_ip(&CreateFloatingIp {
                        kind: IpType::Ipv4,
                        home_location: token.location.clone(),
                        name: Some(naming::scoped_name(
                            "pool",
                            &format!("{pool_mark}-{}", token.site),
                            &marks.child,
                            &marks.owner_tag,
                        )),
                        description: Some(format!("pool {}", token.pool)),
                        labels: marks.hetzner_labels(),
                    })
                    .await;
                let ip = match created {
                    Ok(created) => created.floating_ip,
                    Err(e) if crate::sites::is_uniqueness(&e) => {
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
                    Err(e) => return Err(self.deploy_failure(token, &e)),
                };
                PoolAddressHeld {
                    pool_mark,
                    pool: Some(token.pool.clone()),
                    site: token.site.clone(),
                    id: format!("hetzner:{}", ip.id),
                    ip: ip
                        .ip
                        .parse()
                        .map_err(|_| self.pool_failure(token, &SiteError::BadAddress(ip.ip)))?,
                    attached_to: None,
                }
            }
            Cloud::Vultr => {
                let Some(client) = &self.shared.clients.vultr else {
                    return Err(self.pool_failure(token, &SiteError::NoClient(cloud)));
                };
                let ip = client
                    .create_reserved_ip(
                        &token.location.as_str().into(),
                        "v4",
                        Some(&marks.vultr_text()),
                    )
                    .await
                    .map_err(|e| self.deploy_failure(token, &e))?;
                PoolAddressHeld {
                    pool_mark,
                    pool: Some(token.pool.clone()),
                    site: token.site.clone(),
                    id: format!("vultr:{}", ip.id),
                    ip: ip
                        .subnet
                        .parse()
                        .map_err(|_| self.pool_failure(token, &SiteError::BadAddress(ip.subnet)))?,
                    attached_to: None,
                }
            }
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
        let Some(gateway) = at_site
            .iter()
            .find(|o| o.marks.role == Role::Gateway && o.state != orc_proto::NodeState::Deleting)
        else {
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
        let _addressing = self.shared.sites.addressing.lock().await;
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
        match gateway.cloud {
            Cloud::Hetzner => {
                let Some(client) = &self.shared.clients.hetzner else {
                    return Err(SiteError::NoClient(Cloud::Hetzner));
                };
                let (Ok(ip), Ok(server)) = (
                    id_of(&address.id).parse::<u64>(),
                    id_of(&gateway.instance_ref).parse::<u64>(),
                ) else {
                    return Err(SiteError::BadAddress(address.id.clone()));
                };
                let action = client
                    .assign_floating_ip(HcloudFloatingIpId(ip), HcloudServerId(server))
                    .await?;
                let deadline = tokio::time::Instant::now() + self.shared.options.deploy_deadline;
                client
                    .wait_for_actions(&[action.id], self.shared.options.poll_interval, deadline)
                    .await?;
            }
            Cloud::Vultr => {
                let Some(client) = &self.shared.clients.vultr else {
                    return Err(SiteError::NoClient(Cloud::Vultr));
                };
                let id = VultrReservedIpId::from(id_of(&address.id));
                if address.attached_to.is_some() {
                    match client.detach_reserved_ip(&id).await {
                        Ok(()) => {}
                        Err(e) if e.is_not_found() => {}
                        Err(e) => return Err(e.into()),
                    }
                }
                client
                    .attach_reserved_ip(&id, &VultrInstanceId::from(id_of(&gateway.instance_ref)))
                    .await?;
            }
        }
        Ok(())
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
        let _addressing = self.shared.sites.addressing.lock().await;
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
            o.marks.role == Role::Node
                && o.marks.site == site
                && o.state != orc_proto::NodeState::Deleting
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
        let gone = |r: Result<(), CloudError>| match r {
            Ok(()) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(SiteError::Cloud(e)),
        };
        match cloud {
            Cloud::Hetzner => {
                let Some(client) = &self.shared.clients.hetzner else {
                    return Err(SiteError::NoClient(cloud));
                };
                let Ok(id) = id_of(&address.id).parse::<u64>() else {
                    return Err(SiteError::BadAddress(address.id.clone()));
                };
                let id = HcloudFloatingIpId(id);
                if address.attached_to.is_some() {
                    match client.unassign_floating_ip(id).await {
                        Ok(action) => {
                            let deadline =
                                tokio::time::Instant::now() + self.shared.options.deploy_deadline;
                            client
                                .wait_for_actions(
                                    &[action.id],
                                    self.shared.options.poll_interval,
                                    deadline,
                                )
                                .await?;
                        }
                        Err(e) if e.is_not_found() => return Ok(()),
                        Err(e) => return Err(e.into()),
                    }
                }
                gone(client.delete_floating_ip(id).await)
            }
            Cloud::Vultr => {
                let Some(client) = &self.shared.clients.vultr else {
                    return Err(SiteError::NoClient(cloud));
                };
                let id = VultrReservedIpId::from(id_of(&address.id));
                if address.attached_to.is_some() {
                    gone(client.detach_reserved_ip(&id).await)?;
                }
                gone(client.delete_reserved_ip(&id).await)
            }
        }
    }
}
