//! Deploys and destroys of tenant nodes and site gateways.
//!
//! A deploy: reads the quote token, looks the node id up (a found instance is carried on,
//! not made again), opens the site ([`crate::sites`]), then creates the instance with the
//! hostname-safe name, the OS image (the gateway image for gateways), the sealed SSH key,
//! every mark, and the first-boot user data ([`user_data()`]):
//! - a tenant node has no public IPv4 and sits on the site's private network; its extra
//!   disks (marked with the node id, [`disks`]) follow the create;
//! - a gateway takes the site's stable IPv4 as its public address and the fixed private
//!   address (`.254` of the prefix), and the site's pool addresses are attached to it.
//!
//! Every step after the create also runs when the instance is found, so a deploy retried
//! after a failure at any step finishes the same node without a second resource.
//!
//! A destroy (`destroy`) deletes a tenant node's extra disks and then its instances (an
//! absent node is a success), then closes the site when no tenant node is left there (after
//! a gateway too, which may have reopened a closed site), and releases a pool's address
//! when the pool has no node left there.
//!
//! Refusals and the operator's log lines for them are in `refusals`.
//!
//! Request costs: a deploy into an open site is one lookup, one create and (where the cloud
//! has actions) one action poll; disks add a listing and one create (and an attach where
//! the create does not attach) per disk; a gateway adds its network attach and poll (where
//! the create does not attach it) and one request per pool address.

mod destroy;
pub mod disks;
mod refusals;
pub mod user_data;

use std::time::Duration;

use orc_common::{FaultClass, Money};
use orc_partner::admission::{admit, admit_create};
use orc_partner::ids::{NodeId, SiteName};
use orc_partner::quote::Purpose;
use orc_partner::state::Reservation;
use orc_partner::words;
use orc_proto as proto;
use orc_provider_sdk::ProgressSink;

use self::refusals::refuse;
pub use self::user_data::{Boot, user_data};
use crate::clouds::{CloudOps, CreateError, InstanceSpec};
use crate::instances::{self, Owned, Ownership};
use crate::naming::{self, Marks};
use crate::provider::{PartnerProvider, refused};
use crate::sites::{OpenSite, SiteError};
use crate::token::OfferToken;

impl PartnerProvider {
    /// Carries out one deploy (the body of `Provider::deploy`).
    pub(crate) async fn carry_out_deploy(
        &self,
        d: proto::Deploy,
        progress: &ProgressSink,
    ) -> proto::DeployResult {
        self.become_serving();
        let node = d.node_id.as_str().to_string();
        let decoded = OfferToken::decode(d.quote_token.as_str());
        if let Err(e) = &decoded {
            tracing::debug!(node = %node, error = %e, "the quote token's problem");
        }
        let token = decoded.ok();
        let offered = token.as_ref().map(OfferToken::offered);
        let live = offered.as_ref().and_then(|o| {
            let site = SiteName::new(o.site).ok()?;
            self.shared
                .quotes
                .with(|state| state.live_at(&site).cloned())
        });
        let config = &self.shared.config;
        let site = offered.as_ref().map_or("(unknown)", |o| o.site);
        if let Some(refusal) = self.refusal(
            &node,
            site,
            admit(config, &node, offered.as_ref(), live.as_ref()),
        ) {
            return refusal;
        }
        let (Some(token), Some(offered)) = (token.as_ref(), offered) else {
            return refuse(words::could_not_create(&node, "(unknown)"));
        };
        let clients = &self.shared.clients;
        let (Some(ownership), Some(ops)) = (
            self.shared.ownership.get(&token.cloud),
            clients.get(token.cloud),
        ) else {
            tracing::info!(node = %node, site = %token.site, "The site's cloud has no key; the operator must add one");
            return proto::DeployResult::Refused(self.needs_operator(token));
        };
        let Some(owner_tag) = ownership.tags.first().cloned() else {
            return proto::DeployResult::Refused(self.needs_operator(token));
        };
        let existing = match instances::find_node(clients, token.cloud, &node, ownership).await {
            Ok(found) => found.into_iter().next(),
            Err(e) => return proto::DeployResult::Refused(self.deploy_failure(token, &e)),
        };
        if existing.is_none()
            && let Some(refusal) = self.refusal(
                &node,
                &token.site,
                admit_create(config, &offered, self.shared.now()),
            )
        {
            return refusal;
        }
        if self.shared.sites.get(&token.site).is_none() {
            progress
                .note(words::progress_preparing_site(&token.site))
                .await;
        }
        let open = match self
            .open_site(token.cloud, &token.site, &token.location)
            .await
        {
            Ok(open) => open,
            Err(e) => return proto::DeployResult::Refused(self.site_failure(token, &e)),
        };
        let created = existing.is_none();
        let owned = match existing {
            Some(owned) => owned,
            None => {
                let sealed = match self.sealed_key(token.cloud).await {
                    Ok(id) => id,
                    Err(e) => return proto::DeployResult::Refused(self.site_failure(token, &e)),
                };
                let linux = config
                    .os_map
                    .get(d.os.as_str())
                    .and_then(|entry| entry.selectors.get(&token.cloud))
                    .is_none_or(|selector| selector.family != "windows");
                let boot = if token.gateway {
                    Boot::Gateway {
                        prefix: open.prefix,
                        claim_address: ops.gateway_claims_address(),
                    }
                } else {
                    Boot::Node(open.node_boot())
                };
                let user_data = match user_data(
                    &d.bootstrap.0,
                    &d.ssh_keys,
                    config,
                    linux || token.gateway,
                    boot,
                ) {
                    Ok(data) => data,
                    Err(problem) => {
                        tracing::warn!(node = %node, problem, "the node's first-boot payload cannot be used");
                        return refuse(words::could_not_create(&node, &token.site));
                    }
                };
                let marks = Marks {
                    owner_tag,
                    child: ownership.child.clone(),
                    node_id: node.clone(),
                    site: token.site.clone(),
                    purpose: if token.gateway {
                        Purpose::Gateway
                    } else {
                        Purpose::Tenant
                    },
                    rate: token.rate,
                    account_monthly: token.account_monthly,
                    pool: (!token.pool.is_empty()).then(|| naming::pool_label(&token.pool)),
                    gateway_gen: token
                        .gateway
                        .then(|| naming::gateway_generation(config, token.cloud)),
                };
                tracing::info!(node = %node, site = %token.site, role = marks.purpose.as_str(), "Creating the node's instance");
                progress.note(words::progress_creating()).await;
                let spec = InstanceSpec {
                    name: naming::hostname(&token.node),
                    location: &token.location,
                    plan: &token.plan,
                    image: &token.image,
                    marks: &marks,
                    user_data,
                    sealed_key: &sealed,
                    network: &open.network,
                    stable: token.gateway.then_some(open.stable.id.as_str()),
                };
                match self.create(ops, token, spec, ownership).await {
                    Ok(owned) => owned,
                    Err(refusal) => return proto::DeployResult::Refused(refusal),
                }
            }
        };
        if let Err(refusal) = self.carry_on(token, &owned, &open, progress).await {
            return proto::DeployResult::Refused(refusal);
        }
        self.finish(token, owned, created, progress).await
    }

    /// The steps after the create: a node's extra disks, a gateway's private address and
    /// pool addresses (and, for a public pool's node, its pool address).
    async fn carry_on(
        &self,
        token: &OfferToken,
        owned: &Owned,
        open: &OpenSite,
        progress: &ProgressSink,
    ) -> Result<(), proto::Refusal> {
        if owned.marks.purpose == Purpose::Gateway {
            progress.note(words::progress_gateway_addresses()).await;
            self.attach_gateway_network(token, owned, open).await?;
            self.attach_pool_addresses(token, owned, open).await?;
        } else {
            if !token.disks_gib.is_empty() {
                progress.note(words::progress_disks()).await;
                self.ensure_disks(token, owned).await?;
            }
            if token.public && !token.pool.is_empty() {
                self.ensure_pool_address(token, open).await?;
            }
        }
        Ok(())
    }

    /// Creates the node's instance, answering the refusal for a create that did not.
    async fn create(
        &self,
        ops: &dyn CloudOps,
        token: &OfferToken,
        spec: InstanceSpec<'_>,
        ownership: &Ownership,
    ) -> Result<Owned, proto::Refusal> {
        match ops.create_instance(spec, ownership, self.waits()).await {
            Ok(owned) => Ok(owned),
            Err(CreateError::Cloud(e))
                if token.gateway && e.class() == FaultClass::AlreadyAttached =>
            {
                Err(self.address_held(token, &e))
            }
            Err(CreateError::Cloud(e)) => Err(self.deploy_failure(token, &e)),
            Err(CreateError::Unusable(problem)) => {
                tracing::debug!(node = %token.node, problem, "the cloud's answer to the create cannot be used");
                Err(self.failed(token))
            }
        }
    }

    /// Attaches a gateway to its site network at the fixed private address, where the
    /// create did not and it is not attached already.
    async fn attach_gateway_network(
        &self,
        token: &OfferToken,
        owned: &Owned,
        open: &OpenSite,
    ) -> Result<(), proto::Refusal> {
        let ops = self
            .cloud_ops(owned.cloud)
            .map_err(|e| self.site_failure(token, &e))?;
        let gateway_ip = open.prefix.gateway();
        let attached = ops
            .attach_gateway_network(&owned.instance_ref, &open.network, gateway_ip, self.waits())
            .await;
        match attached {
            Ok(true) => {
                tracing::info!(node = %token.node, site = %token.site, address = %gateway_ip, "The gateway holds the site's fixed private address");
                Ok(())
            }
            Ok(false) => Ok(()),
            Err(SiteError::BadAddress(_)) => Err(self.failed(token)),
            Err(e) => Err(self.site_failure(token, &e)),
        }
    }

    /// Waits (a gateway on a cloud that shows addresses late) until the instance shows its
    /// address, then answers it as
    /// deployed and commits its usage. A replica that created the node (`created`) without
    /// holding its reservation (another replica answered the quote) records the usage from
    /// the marks; a found instance was counted when the cloud was counted.
    async fn finish(
        &self,
        token: &OfferToken,
        mut owned: Owned,
        created: bool,
        progress: &ProgressSink,
    ) -> proto::DeployResult {
        let late = self
            .shared
            .clients
            .get(owned.cloud)
            .filter(|ops| ops.shows_address_late());
        if let Some(ops) = late
            && owned.addresses.is_empty()
            && owned.marks.purpose == Purpose::Gateway
        {
            progress.note(words::progress_starting()).await;
            let id = crate::clouds::id_of(&owned.instance_ref).to_string();
            let deadline = tokio::time::Instant::now() + self.shared.options.deploy_deadline;
            let Some(ownership) = self.shared.ownership.get(&owned.cloud) else {
                return refuse(words::could_not_create(&token.node, &token.site));
            };
            while owned.addresses.is_empty() {
                if tokio::time::Instant::now() + self.shared.options.poll_interval > deadline {
                    tracing::info!(node = %token.node, site = %token.site, "The instance has no address yet; the deploy will be retried");
                    return proto::DeployResult::Refused(refused(
                        proto::RefusalKind::Transient,
                        words::could_not_finish(&self.class_title(&token.class)),
                    ));
                }
                tokio::time::sleep(self.shared.options.poll_interval).await;
                match ops.get_instance(&id, ownership).await {
                    Ok(Some(fresh)) => owned = fresh,
                    Ok(None) => return refuse(words::could_not_create(&token.node, &token.site)),
                    Err(e) => return proto::DeployResult::Refused(self.deploy_failure(token, &e)),
                }
            }
        }
        let (Ok(node_id), Ok(site), Ok(instance_ref)) = (
            NodeId::new(token.node.as_str()),
            SiteName::new(owned.marks.site.as_str()),
            proto::InstanceRef::new(owned.instance_ref.as_str()),
        ) else {
            return refuse(words::could_not_create(&token.node, &token.site));
        };
        let expires_at = self.shared.now().plus(Duration::from_secs(60));
        self.shared.quotes.with(|state| {
            if created && state.reservation(&node_id).is_none() {
                state.reserve(
                    node_id.clone(),
                    Reservation {
                        cloud: owned.cloud,
                        site: site.clone(),
                        purpose: owned.marks.purpose,
                        usd_monthly: owned.marks.usd_monthly(),
                        expires_at,
                    },
                );
            }
            state.commit(&node_id);
        });
        self.shared.known.remember(&token.node, site.clone());
        tracing::info!(node = %token.node, site = %site, instance = %owned.instance_ref, "The node's instance exists");
        proto::DeployResult::Deployed(proto::Deployed {
            node_id,
            site,
            addresses: owned.addresses.into_iter().chain(owned.private).collect(),
            price: owned.marks.usd_monthly().map(Money::usd_per_month),
            instance_ref,
            placed: Some(proto::Whereabouts {
                cloud: owned.cloud.to_string(),
                location: token.location.clone(),
                plan: token.plan.clone(),
            }),
        })
    }
}
