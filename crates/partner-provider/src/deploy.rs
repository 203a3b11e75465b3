//! Deploys and destroys of tenant nodes and site gateways.
//!
//! A deploy: reads the quote token, looks the node id up (a found instance is carried on,
//! not made again), opens the site ([`crate::sites`]), then creates the instance with the
//! hostname-safe name, the OS image (the gateway image for gateways), the sealed SSH key,
//! every mark, and the first-boot user data ([`user_data`]):
//! - a tenant node has no public IPv4 and sits on the site's private network; its extra
//!   disks (Hetzner volumes, Vultr blocks, marked with the node id) follow the create;
//! - a gateway takes the site's stable IPv4 as its public address and the fixed private
//!   address (`.254` of the prefix), and the site's pool addresses are attached to it.
//!
//! Every step after the create also runs when the instance is found, so a deploy retried
//! after a failure at any step finishes the same node without a second resource.
//!
//! A destroy deletes a tenant node's extra disks and then its instances (an absent node is
//! a success), then closes the site when no tenant node is left there (after a gateway too,
//! which may have reopened a closed site), and releases a pool's address when the pool has
//! no node left there.
//!
//! Request costs: a deploy into an open site is one lookup, one create and (Hetzner) one
//! action poll; disks add a listing and one create (and a Vultr attach) per disk; a gateway
//! adds its network attach and poll (Hetzner) and one request per pool address.

use std::time::Duration;

use orc_cloud::hetzner::{
    CreateServer, CreateVolume, ImageRef, PublicNetRequest, ServerFilter, VolumePlacement,
};
use orc_cloud::vultr::{CreateBlock, CreateInstance, InstanceSource};
use orc_cloud::{
    CloudError, HcloudImageId, HcloudNetworkId, HcloudPrimaryIpId, HcloudServerId, HcloudVolumeId,
    VultrBlockId, VultrInstanceId, VultrOsId, VultrReservedIpId, VultrVpcId,
};
use orc_common::{FaultClass, Money};
use orc_partner::ids::{Cloud, NodeId, SiteName};
use orc_partner::params::Config;
use orc_partner::quote::Purpose;
use orc_partner::state::Reservation;
use orc_partner::words;
use orc_proto as proto;
use orc_provider_sdk::ProgressSink;

use crate::instances::{self, Owned, Ownership};
use crate::naming::{self, Marks, Prefix, ResourceKind, ResourceMarks, Role};
use crate::provider::{PartnerProvider, lock, now, refused};
use crate::sites::{self, NetworkBoot, OpenSite, SiteError};
use crate::token::OfferToken;

/// What the first boot sets up besides the bootstrap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Boot {
    /// No network set-up (Windows images, or a test).
    Plain,
    /// A tenant node: default route through the site gateway.
    Node(NetworkBoot),
    /// A site gateway: forwarding and masquerading for the site's prefix, holding the fixed
    /// private address (on Vultr it adds it itself).
    Gateway { prefix: Prefix, claim_address: bool },
}

/// The node's user data: the zone's bootstrap payload, plus a cloud-config that installs
/// the deploy's SSH keys and the `ssh_keys` param for root (Linux images: `linux`) and the
/// network set-up of `boot`. With both, a MIME multipart document carries the two parts.
/// `Err` names what is wrong.
pub fn user_data(
    bootstrap: &[u8],
    deploy_keys: &[String],
    config: &Config,
    linux: bool,
    boot: Boot,
) -> Result<Option<String>, &'static str> {
    let bootstrap = std::str::from_utf8(bootstrap).map_err(|_| "the bootstrap is not UTF-8")?;
    let mut keys: Vec<String> = deploy_keys.iter().map(|k| k.trim().to_string()).collect();
    for key in &config.ssh_keys {
        keys.push(
            key.to_openssh()
                .map_err(|_| "an ssh_keys entry cannot be written")?,
        );
    }
    keys.retain(|k| !k.is_empty());
    keys.dedup();
    let mut commands: Vec<String> = Vec::new();
    match boot {
        Boot::Plain => {}
        Boot::Node(net) => {
            commands.push(format!(
                "ip route replace default via {} || true",
                net.default_via
            ));
        }
        Boot::Gateway {
            prefix,
            claim_address,
        } => {
            if claim_address {
                let [a, b, c, _] = prefix.network().octets();
                commands.push(format!(
                    "dev=$(ip -o -4 addr show | awk '$4 ~ /^{a}\\.{b}\\.{c}\\./ {{print $2; exit}}'); [ -n \"$dev\" ] && ip addr add {}/{} dev \"$dev\" || true",
                    prefix.gateway(),
                    prefix.bits()
                ));
            }
            commands.push("sysctl -w net.ipv4.ip_forward=1".to_string());
            commands.push(format!(
                "iptables -t nat -C POSTROUTING -s {prefix} ! -d {prefix} -j MASQUERADE 2>/dev/null || iptables -t nat -A POSTROUTING -s {prefix} ! -d {prefix} -j MASQUERADE"
            ));
        }
    }
    let cloud_config = (linux && (!keys.is_empty() || !commands.is_empty())).then(|| {
        let mut text = "#cloud-config\n".to_string();
        if !keys.is_empty() {
            text.push_str("disable_root: false\nssh_authorized_keys:\n");
            for key in &keys {
                text.push_str(&format!("  - {}\n", serde_json::Value::String(key.clone())));
            }
        }
        if !commands.is_empty() {
            text.push_str("runcmd:\n");
            for command in &commands {
                text.push_str(&format!(
                    "  - [sh, -c, {}]\n",
                    serde_json::Value::String(command.clone())
                ));
            }
        }
        text
    });
    Ok(match (bootstrap.is_empty(), cloud_config) {
        (true, None) => None,
        (true, Some(cc)) => Some(cc),
        (false, None) => Some(bootstrap.to_string()),
        (false, Some(cc)) => {
            let boundary = "==orc-partner-user-data==";
            let kind = if bootstrap.starts_with("#cloud-config") {
                "text/cloud-config"
            } else {
                "text/x-shellscript"
            };
            Some(format!(
                "Content-Type: multipart/mixed; boundary=\"{boundary}\"\nMIME-Version: 1.0\n\n--{boundary}\nContent-Type: text/cloud-config; charset=\"utf-8\"\n\n{cc}\n--{boundary}\nContent-Type: {kind}; charset=\"utf-8\"\n\n{bootstrap}\n--{boundary}--\n"
            ))
        }
    })
}

/// Whether a gateway create was refused because the stable IPv4 is still attached to
/// another instance.
fn address_still_held(error: &CloudError) -> bool {
    error.class() == FaultClass::AlreadyAttached
}

fn refuse(words: String) -> proto::DeployResult {
    proto::DeployResult::Refused(refused(proto::RefusalKind::Failed, words))
}

/// The numeric id after `hetzner:` (or any `<cloud>:` prefix).
fn numeric(reference: &str) -> Option<u64> {
    reference
        .split_once(':')
        .map_or(reference, |(_, id)| id)
        .parse()
        .ok()
}

/// The text id after `vultr:` (or any `<cloud>:` prefix).
fn text_id(reference: &str) -> &str {
    reference.split_once(':').map_or(reference, |(_, id)| id)
}

impl PartnerProvider {
    fn needs_operator(&self, token: &OfferToken) -> proto::Refusal {
        refused(
            proto::RefusalKind::OperatorFix,
            words::needs_operator(&token.node, &token.site),
        )
    }

    fn failed(&self, token: &OfferToken) -> proto::Refusal {
        refused(
            proto::RefusalKind::Failed,
            words::could_not_create(&token.node, &token.site),
        )
    }

    /// The refusal for a site step that failed, logged for the operator.
    fn site_failure(&self, token: &OfferToken, error: &SiteError) -> proto::Refusal {
        match error {
            SiteError::Cloud(e) => self.deploy_failure(token, e),
            SiteError::NoClient(cloud) => {
                tracing::info!(node = %token.node, site = %token.site, %cloud, "The site's cloud has no key; the operator must add one");
                self.needs_operator(token)
            }
            SiteError::NoPrefix => {
                tracing::warn!(node = %token.node, site = %token.site, "No private prefix is left for a new site; the operator must free one");
                self.needs_operator(token)
            }
            SiteError::UnknownLocation(location) => {
                tracing::warn!(node = %token.node, site = %token.site, %location, "The cloud does not list the site's location");
                self.failed(token)
            }
            SiteError::BadAddress(text) => {
                tracing::warn!(node = %token.node, site = %token.site, answer = %text, "the cloud answered an address the partner cannot read");
                self.failed(token)
            }
        }
    }

    /// Carries out one deploy (the body of `Provider::deploy`).
    pub(crate) async fn carry_out_deploy(
        &self,
        d: proto::Deploy,
        progress: &ProgressSink,
    ) -> proto::DeployResult {
        self.become_serving();
        let node = d.node_id.as_str().to_string();
        let token = match OfferToken::decode(d.quote_token.as_str()) {
            Ok(token) if token.node == node => token,
            Ok(token) => {
                tracing::warn!(node = %node, token_node = %token.node, "a deploy came with another node's quote token");
                return refuse(words::could_not_create(&node, &token.site));
            }
            Err(e) => {
                tracing::warn!(node = %node, error = %e, "a deploy came with a quote token the partner cannot read");
                return refuse(words::could_not_create(&node, "(unknown)"));
            }
        };
        let config = &self.shared.config;
        let mapped = config.regions.site(&token.site).is_some_and(|(_, site)| {
            site.cloud == token.cloud && site.location.as_str() == token.location
        });
        if !mapped {
            tracing::info!(node = %node, site = %token.site, "The site of this offer is no longer mapped where the offer put it; the deploy fails");
            return refuse(words::could_not_create(&node, &token.site));
        }
        if let Some(words) = crate::inventory::guard::refuses(&self.shared, &node, &token.site) {
            tracing::info!(node = %node, site = %token.site, "The site is live at another place than the map gives it; the deploy fails");
            return refuse(words);
        }
        if !naming::is_label_value(&node) {
            tracing::warn!(node = %node, "This node id cannot be recorded on a cloud instance (at most 63 letters, digits, '-', '_' or '.')");
            return refuse(words::could_not_create(&node, &token.site));
        }
        let keyed = config.cloud(token.cloud).is_some_and(|c| c.is_keyed());
        let Some(ownership) = self.shared.ownership.get(&token.cloud).filter(|_| keyed) else {
            tracing::info!(node = %node, site = %token.site, "The site's cloud has no key; the operator must add one");
            return proto::DeployResult::Refused(self.needs_operator(&token));
        };
        let Some(owner_tag) = ownership.tags.first().cloned() else {
            return proto::DeployResult::Refused(self.needs_operator(&token));
        };
        let clients = &self.shared.clients;
        let existing = match instances::find_node(clients, token.cloud, &node, ownership).await {
            Ok(found) => found.into_iter().next(),
            Err(e) => return proto::DeployResult::Refused(self.deploy_failure(&token, &e)),
        };
        if existing.is_none() {
            if token.expired(now()) {
                lock(&self.shared.state).release(&NodeId::new(node.as_str()));
                tracing::info!(node = %node, site = %token.site, "The offer lapsed before the deploy; the node will be quoted again");
                return refuse(words::could_not_create(&node, &token.site));
            }
            let enabled = config.cloud(token.cloud).is_some_and(|c| c.enabled);
            if !enabled && !token.gateway {
                lock(&self.shared.state).release(&NodeId::new(node.as_str()));
                tracing::info!(node = %node, site = %token.site, "The site's cloud is retired; it places no new node");
                return proto::DeployResult::Refused(refused(
                    proto::RefusalKind::NoCapacity,
                    words::no_capacity(&self.class_title(&token.class)),
                ));
            }
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
            Err(e) => return proto::DeployResult::Refused(self.site_failure(&token, &e)),
        };
        let created = existing.is_none();
        let owned = match existing {
            Some(owned) => owned,
            None => {
                let sealed = match self.sealed_key(token.cloud).await {
                    Ok(id) => id,
                    Err(e) => return proto::DeployResult::Refused(self.site_failure(&token, &e)),
                };
                let linux = config
                    .os_map
                    .get(d.os.as_str())
                    .and_then(|entry| entry.selectors.get(&token.cloud))
                    .is_none_or(|selector| selector.family != "windows");
                let boot = if token.gateway {
                    Boot::Gateway {
                        prefix: open.prefix,
                        claim_address: token.cloud == Cloud::Vultr,
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
                    role: if token.gateway {
                        Role::Gateway
                    } else {
                        Role::Node
                    },
                    rate: token.rate,
                    account_monthly: token.account_monthly,
                    pool: (!token.pool.is_empty()).then(|| naming::pool_label(&token.pool)),
                    gateway_gen: token
                        .gateway
                        .then(|| naming::gateway_generation(config, token.cloud)),
                };
                tracing::info!(node = %node, site = %token.site, role = marks.role.as_str(), "Creating the node's instance");
                progress.note(words::progress_creating()).await;
                let created = match token.cloud {
                    Cloud::Hetzner => {
                        self.create_hetzner(&token, &marks, user_data, ownership, &open, &sealed)
                            .await
                    }
                    Cloud::Vultr => {
                        self.create_vultr(&token, &marks, user_data, ownership, &open, &sealed)
                            .await
                    }
                };
                match created {
                    Ok(owned) => owned,
                    Err(refusal) => return proto::DeployResult::Refused(refusal),
                }
            }
        };
        if let Err(refusal) = self.carry_on(&token, &owned, &open, progress).await {
            return proto::DeployResult::Refused(refusal);
        }
        self.finish(&token, owned, created, progress).await
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
        if owned.marks.role == Role::Gateway {
            progress.note(words::progress_gateway_addresses()).await;
            if owned.cloud == Cloud::Hetzner {
                self.attach_gateway_network(token, owned, open).await?;
            }
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

    async fn create_hetzner(
        &self,
        token: &OfferToken,
        marks: &Marks,
        user_data: Option<String>,
        ownership: &Ownership,
        open: &OpenSite,
        sealed: &str,
    ) -> Result<Owned, proto::Refusal> {
        let Some(client) = &self.shared.clients.hetzner else {
            return Err(self.needs_operator(token));
        };
        let (Ok(image), Some(network), Some(key)) = (
            token.image.parse::<u64>(),
            open.network.parse::<u64>().ok(),
            sites::hetzner_key_id(sealed),
        ) else {
            return Err(self.failed(token));
        };
        let name = naming::hostname(&token.node);
        let mut request = CreateServer::new(
            name.clone(),
            token.plan.clone(),
            ImageRef::Id(HcloudImageId(image)),
        );
        request.location = Some(token.location.clone());
        request.labels = marks.hetzner_labels();
        request.user_data = user_data;
        request.ssh_keys = vec![key];
        if token.gateway {
            let Some(stable) = numeric(&open.stable.id) else {
                return Err(self.failed(token));
            };
            request.public_net = PublicNetRequest {
                enable_ipv4: true,
                enable_ipv6: false,
                ipv4: Some(HcloudPrimaryIpId(stable)),
                ipv6: None,
            };
        } else {
            request.networks = vec![HcloudNetworkId(network)];
            request.public_net = PublicNetRequest {
                enable_ipv4: false,
                enable_ipv6: false,
                ipv4: None,
                ipv6: None,
            };
        }
        match client.create_server(&request).await {
            Ok(created) => {
                let deadline = tokio::time::Instant::now() + self.shared.options.deploy_deadline;
                let waited = client
                    .wait_for_actions(
                        &created.action_ids(),
                        self.shared.options.poll_interval,
                        deadline,
                    )
                    .await;
                match waited {
                    Ok(_) => instances::hetzner_owned(&created.server, ownership).ok_or_else(|| {
                        tracing::warn!(node = %token.node, "the created server does not carry the partner's labels");
                        self.failed(token)
                    }),
                    Err(e @ CloudError::ActionFailed { .. }) => {
                        let r = format!("hetzner:{}", created.server.id);
                        if let Err(cleanup) = instances::delete(&self.shared.clients, &r).await {
                            tracing::warn!(node = %token.node, instance = %r, error = %cleanup, "a server whose creation failed could not be deleted; the next deploy or inventory finds it");
                        }
                        Err(self.deploy_failure(token, &e))
                    }
                    Err(e) => Err(self.deploy_failure(token, &e)),
                }
            }
            Err(e) if sites::is_uniqueness(&e) => {
                let winner = client
                    .list_servers(&ServerFilter {
                        name: Some(name),
                        ..ServerFilter::default()
                    })
                    .await
                    .map_err(|e| self.deploy_failure(token, &e))?;
                winner
                    .iter()
                    .filter_map(|s| instances::hetzner_owned(s, ownership))
                    .find(|o| o.marks.node_id == token.node)
                    .ok_or_else(|| {
                        tracing::warn!(node = %token.node, "the node's server name is held by an instance that is not this node's");
                        self.failed(token)
                    })
            }
            Err(e) if token.gateway && address_still_held(&e) => Err(self.address_held(token, &e)),
            Err(e) => Err(self.deploy_failure(token, &e)),
        }
    }

    async fn create_vultr(
        &self,
        token: &OfferToken,
        marks: &Marks,
        user_data: Option<String>,
        ownership: &Ownership,
        open: &OpenSite,
        sealed: &str,
    ) -> Result<Owned, proto::Refusal> {
        let Some(client) = &self.shared.clients.vultr else {
            return Err(self.needs_operator(token));
        };
        let Ok(os) = token.image.parse::<u64>() else {
            return Err(self.failed(token));
        };
        let name = naming::hostname(&token.node);
        let mut request = CreateInstance::new(
            token.location.as_str(),
            token.plan.as_str(),
            InstanceSource::Os(VultrOsId(os)),
        );
        request.label = Some(name.clone());
        request.hostname = Some(name);
        request.tags = marks.vultr_tags();
        request.user_data = user_data;
        request.attach_vpc = vec![VultrVpcId::from(open.network.as_str())];
        request.sshkey_id = vec![sites::vultr_key_id(sealed)];
        if token.gateway {
            request.reserved_ipv4 = Some(VultrReservedIpId::from(text_id(&open.stable.id)));
        } else {
            request.disable_public_ipv4 = true;
        }
        match client.create_instance(&request).await {
            Ok(instance) => instances::vultr_owned(&instance, ownership).ok_or_else(|| {
                tracing::warn!(node = %token.node, "the created instance does not carry the partner's tags");
                self.failed(token)
            }),
            Err(e) if token.gateway && address_still_held(&e) => Err(self.address_held(token, &e)),
            Err(e) => Err(self.deploy_failure(token, &e)),
        }
    }

    /// The refusal when the site's stable IPv4 is still on the previous gateway (its
    /// delete has not finished): the zone tries again.
    fn address_held(&self, token: &OfferToken, error: &CloudError) -> proto::Refusal {
        tracing::debug!(node = %token.node, site = %token.site, error = %error, "the cloud's answer");
        tracing::info!(node = %token.node, site = %token.site, "The site's stable address is still held by the previous gateway; the deploy will be retried");
        refused(
            proto::RefusalKind::Transient,
            words::could_not_finish(&self.class_title(&token.class)),
        )
    }

    /// Attaches a Hetzner gateway to its site network at the fixed private address, unless
    /// it is attached already.
    async fn attach_gateway_network(
        &self,
        token: &OfferToken,
        owned: &Owned,
        open: &OpenSite,
    ) -> Result<(), proto::Refusal> {
        let Some(client) = &self.shared.clients.hetzner else {
            return Err(self.needs_operator(token));
        };
        let (Some(server), Some(network)) = (numeric(&owned.instance_ref), numeric(&open.network))
        else {
            return Err(self.failed(token));
        };
        let gateway_ip = open.prefix.gateway().to_string();
        let attached = client
            .attach_server_to_network(
                HcloudServerId(server),
                HcloudNetworkId(network),
                Some(&gateway_ip),
            )
            .await;
        let action = match attached {
            Ok(action) => action,
            Err(e) if e.class() == FaultClass::AlreadyAttached => {
                return Ok(());
            }
            Err(e) => return Err(self.deploy_failure(token, &e)),
        };
        let deadline = tokio::time::Instant::now() + self.shared.options.deploy_deadline;
        client
            .wait_for_actions(&[action.id], self.shared.options.poll_interval, deadline)
            .await
            .map_err(|e| self.deploy_failure(token, &e))?;
        tracing::info!(node = %token.node, site = %token.site, address = %gateway_ip, "The gateway holds the site's fixed private address");
        Ok(())
    }

    /// Creates the node's missing extra disks, attached to it: one listing, then one create
    /// (Hetzner, attached at once) or a create and an attach (Vultr) per missing disk.
    async fn ensure_disks(&self, token: &OfferToken, owned: &Owned) -> Result<(), proto::Refusal> {
        let Some(mut marks) = self.resource_marks(owned.cloud, ResourceKind::Disk) else {
            return Err(self.needs_operator(token));
        };
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
            match owned.cloud {
                Cloud::Hetzner => {
                    let Some(client) = &self.shared.clients.hetzner else {
                        return Err(self.needs_operator(token));
                    };
                    let Some(server) = numeric(&owned.instance_ref) else {
                        return Err(self.failed(token));
                    };
                    let created = client
                        .create_volume(&CreateVolume {
                            name: format!("{}-d{index}", naming::hostname(&token.node)),
                            size_gb: u64::from(*size),
                            placement: VolumePlacement::Server {
                                server: HcloudServerId(server),
                                automount: false,
                            },
                            format: None,
                            labels: marks.hetzner_labels(),
                        })
                        .await
                        .map_err(|e| self.deploy_failure(token, &e))?;
                    let mut ids: Vec<_> = created.next_actions.iter().map(|a| a.id).collect();
                    ids.extend(created.action.iter().map(|a| a.id));
                    let deadline =
                        tokio::time::Instant::now() + self.shared.options.deploy_deadline;
                    client
                        .wait_for_actions(&ids, self.shared.options.poll_interval, deadline)
                        .await
                        .map_err(|e| self.deploy_failure(token, &e))?;
                }
                Cloud::Vultr => {
                    let Some(client) = &self.shared.clients.vultr else {
                        return Err(self.needs_operator(token));
                    };
                    let block = client
                        .create_block(&CreateBlock {
                            region: token.location.as_str().into(),
                            size_gb: u64::from(*size),
                            label: Some(marks.vultr_text()),
                            block_type: None,
                        })
                        .await
                        .map_err(|e| self.deploy_failure(token, &e))?;
                    client
                        .attach_block(
                            &block.id,
                            &VultrInstanceId::from(text_id(&owned.instance_ref)),
                            true,
                        )
                        .await
                        .map_err(|e| self.deploy_failure(token, &e))?;
                }
            }
            tracing::info!(node = %token.node, site = %token.site, disk = index, size_gib = size, "Created the node's extra disk");
        }
        for disk in held.iter().filter(|d| d.attached_to.is_none()) {
            self.attach_disk(owned, disk)
                .await
                .map_err(|e| self.deploy_failure(token, &e))?;
        }
        Ok(())
    }

    async fn attach_disk(&self, owned: &Owned, disk: &Disk) -> Result<(), CloudError> {
        match owned.cloud {
            Cloud::Hetzner => {
                let (Some(client), Some(server), Some(volume)) = (
                    &self.shared.clients.hetzner,
                    numeric(&owned.instance_ref),
                    numeric(&disk.id),
                ) else {
                    return Ok(());
                };
                let action = client
                    .attach_volume(HcloudVolumeId(volume), HcloudServerId(server), false)
                    .await?;
                let deadline = tokio::time::Instant::now() + self.shared.options.deploy_deadline;
                client
                    .wait_for_actions(&[action.id], self.shared.options.poll_interval, deadline)
                    .await
                    .map(|_| ())
            }
            Cloud::Vultr => {
                let Some(client) = &self.shared.clients.vultr else {
                    return Ok(());
                };
                client
                    .attach_block(
                        &VultrBlockId::from(text_id(&disk.id)),
                        &VultrInstanceId::from(text_id(&owned.instance_ref)),
                        true,
                    )
                    .await
            }
        }
    }

    /// The extra disks of `node` in `cloud`: one listing.
    async fn node_disks(&self, cloud: Cloud, node: &str) -> Result<Vec<Disk>, CloudError> {
        let Some(ownership) = self.shared.ownership.get(&cloud) else {
            return Ok(Vec::new());
        };
        let mine = |marks: &ResourceMarks| {
            marks.kind == ResourceKind::Disk
                && marks.node.as_deref() == Some(node)
                && marks.owned_by(&ownership.child, &ownership.tags)
        };
        let mut out = Vec::new();
        match cloud {
            Cloud::Hetzner => {
                let Some(client) = &self.shared.clients.hetzner else {
                    return Ok(out);
                };
                let selector = format!(
                    "{}={node},{}={},{}=disk",
                    naming::NODE_KEY,
                    naming::CHILD_KEY,
                    ownership.child,
                    naming::KIND_KEY
                );
                for volume in client.list_volumes(Some(&selector)).await? {
                    if let Some(marks) = ResourceMarks::from_hetzner(&volume.labels)
                        && mine(&marks)
                    {
                        out.push(Disk {
                            id: format!("hetzner:{}", volume.id),
                            index: marks.disk.unwrap_or_default(),
                            attached_to: volume.server.map(|s| format!("hetzner:{s}")),
                        });
                    }
                }
            }
            Cloud::Vultr => {
                let Some(client) = &self.shared.clients.vultr else {
                    return Ok(out);
                };
                for block in client.list_blocks().await? {
                    if let Some(marks) = ResourceMarks::from_vultr(&block.label)
                        && mine(&marks)
                    {
                        out.push(Disk {
                            id: format!("vultr:{}", block.id),
                            index: marks.disk.unwrap_or_default(),
                            attached_to: block.attached_to_instance.map(|i| format!("vultr:{i}")),
                        });
                    }
                }
            }
        }
        Ok(out)
    }

    /// Waits (a Vultr gateway) until the instance shows its address, then answers it as
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
        if owned.addresses.is_empty()
            && owned.cloud == Cloud::Vultr
            && owned.marks.role == Role::Gateway
        {
            progress.note(words::progress_starting()).await;
            let Some(client) = &self.shared.clients.vultr else {
                return refuse(words::could_not_create(&token.node, &token.site));
            };
            let id = text_id(&owned.instance_ref).to_string();
            let deadline = tokio::time::Instant::now() + self.shared.options.deploy_deadline;
            let Some(ownership) = self.shared.ownership.get(&Cloud::Vultr) else {
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
                match client
                    .get_instance(&VultrInstanceId::from(id.as_str()))
                    .await
                {
                    Ok(Some(instance)) => match instances::vultr_owned(&instance, ownership) {
                        Some(fresh) => owned = fresh,
                        None => return refuse(words::could_not_create(&token.node, &token.site)),
                    },
                    Ok(None) => return refuse(words::could_not_create(&token.node, &token.site)),
                    Err(e) => return proto::DeployResult::Refused(self.deploy_failure(token, &e)),
                }
            }
        }
        let node_id = NodeId::new(token.node.as_str());
        {
            let mut state = lock(&self.shared.state);
            if created && state.reservation(&node_id).is_none() {
                state.reserve(
                    node_id.clone(),
                    Reservation {
                        cloud: owned.cloud,
                        site: SiteName::new(owned.marks.site.as_str()),
                        purpose: match owned.marks.role {
                            Role::Node => Purpose::Tenant,
                            Role::Gateway => Purpose::Gateway,
                        },
                        usd_monthly: owned.marks.usd_monthly(),
                        expires_at: now().plus(Duration::from_secs(60)),
                    },
                );
            }
            state.commit(&node_id);
        }
        let site = SiteName::new(owned.marks.site.as_str());
        lock(&self.shared.known).insert(token.node.clone(), site.clone());
        let (Ok(node), Ok(site), Ok(instance_ref)) = (
            proto::NodeId::new(token.node.as_str()),
            proto::SiteName::new(site.as_str()),
            proto::InstanceRef::new(owned.instance_ref.as_str()),
        ) else {
            return refuse(words::could_not_create(&token.node, &token.site));
        };
        tracing::info!(node = %token.node, site = %site, instance = %owned.instance_ref, "The node's instance exists");
        proto::DeployResult::Deployed(proto::Deployed {
            node_id: node,
            site,
            addresses: owned.addresses,
            price: owned.marks.usd_monthly().map(Money::usd_per_month),
            instance_ref,
        })
    }

    /// Destroys every instance and extra disk of a node (the body of `Provider::destroy`),
    /// then closes its site when its last tenant node ended and releases its pool's
    /// address when the pool has no node left there.
    pub(crate) async fn carry_out_destroy(&self, node_id: proto::NodeId) -> proto::DestroyResult {
        self.become_serving();
        let node = node_id.as_str().to_string();
        let shared = &self.shared;
        lock(&shared.state).release(&NodeId::new(node.as_str()));
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
            if found.iter().any(|o| o.marks.role == Role::Node)
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
                        let purpose = match owned.marks.role {
                            Role::Node => Purpose::Tenant,
                            Role::Gateway => Purpose::Gateway,
                        };
                        lock(&shared.state).node_ended(cloud, purpose, owned.marks.usd_monthly());
                        lock(&shared.known).remove(&node);
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
                let at = now();
                if let Err(e) = self
                    .close_site_if_empty(cloud, &owned.marks.site, &deleted, owned.marks.role, at)
                    .await
                {
                    tracing::info!(node = %node, site = %owned.marks.site, "Whether the site is now empty could not be read; the destroy will be retried");
                    tracing::debug!(node = %node, error = %e, "the cloud's answer");
                    site_of_failure = Some(Some(owned.marks.site.clone()));
                }
                if owned.marks.role == Role::Node
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

    /// Deletes the node's extra disks in `cloud` before its instance, so a destroy that
    /// fails half-way still finds the instance on retry: one listing, then per attached disk
    /// a detach (and its poll on Hetzner) and per disk a delete.
    async fn delete_disks(&self, cloud: Cloud, node: &str) -> Result<(), CloudError> {
        let disks = self.node_disks(cloud, node).await?;
        for disk in disks {
            let result = match cloud {
                Cloud::Hetzner => {
                    let (Some(client), Some(id)) =
                        (&self.shared.clients.hetzner, numeric(&disk.id))
                    else {
                        continue;
                    };
                    let id = HcloudVolumeId(id);
                    if disk.attached_to.is_some() {
                        match client.detach_volume(id).await {
                            Ok(action) => {
                                let deadline = tokio::time::Instant::now()
                                    + self.shared.options.deploy_deadline;
                                client
                                    .wait_for_actions(
                                        &[action.id],
                                        self.shared.options.poll_interval,
                                        deadline,
                                    )
                                    .await?;
                            }
                            Err(e) if e.is_not_found() => continue,
                            Err(e) => return Err(e),
                        }
                    }
                    client.delete_volume(id).await
                }
                Cloud::Vultr => {
                    let Some(client) = &self.shared.clients.vultr else {
                        continue;
                    };
                    let id = VultrBlockId::from(text_id(&disk.id));
                    if disk.attached_to.is_some() {
                        match client.detach_block(&id, true).await {
                            Ok(()) => {}
                            Err(e) if e.is_not_found() => {}
                            Err(e) => {
                                tracing::debug!(node, error = %e, "detaching a block before its delete");
                            }
                        }
                    }
                    client.delete_block(&id).await
                }
            };
            match result {
                Ok(()) => {
                    tracing::info!(node, disk = disk.index, "The node's extra disk is deleted")
                }
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// An extra disk of a node.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Disk {
    /// `hetzner:<volume id>` or `vultr:<block id>`.
    id: String,
    index: u32,
    attached_to: Option<String>,
}

#[cfg(test)]
mod tests {
    use orc_partner::params::{MapSource, load_config};

    use super::*;

    const KEY: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHkxbq0XPwVbYb2oZfhIfxXvqqxVGbAIbR2l4vXQdQ5Y ops";

    fn config() -> Config {
        load_config(
            &MapSource::new()
                .param("partner_id", "zone-1")
                .param("vultr_api_key", "k")
                .param("vultr_owner_tag", "t"),
        )
        .unwrap()
    }

    #[test]
    fn user_data_carries_the_bootstrap_and_the_keys() {
        let cfg = config();
        assert_eq!(user_data(b"", &[], &cfg, true, Boot::Plain), Ok(None));
        assert_eq!(
            user_data(b"#!/bin/sh\ntrue\n", &[], &cfg, true, Boot::Plain),
            Ok(Some("#!/bin/sh\ntrue\n".to_string()))
        );
        let keys_only = user_data(b"", &[KEY.to_string()], &cfg, true, Boot::Plain)
            .unwrap()
            .unwrap();
        assert_eq!(
            keys_only,
            format!("#cloud-config\ndisable_root: false\nssh_authorized_keys:\n  - \"{KEY}\"\n")
        );
        let both = user_data(
            b"#!/bin/sh\ntrue\n",
            &[KEY.to_string()],
            &cfg,
            true,
            Boot::Plain,
        )
        .unwrap()
        .unwrap();
        assert!(both.starts_with("Content-Type: multipart/mixed;"), "{both}");
        assert!(both.contains("Content-Type: text/x-shellscript"), "{both}");
        assert!(
            both.contains(KEY) && both.contains("#!/bin/sh\ntrue\n"),
            "{both}"
        );
        assert!(user_data(&[0xff, 0xfe], &[], &cfg, true, Boot::Plain).is_err());
        let windows = user_data(b"", &[KEY.to_string()], &cfg, false, Boot::Plain).unwrap();
        assert_eq!(windows, None, "no cloud-config keys on a Windows image");
    }

    #[test]
    fn user_data_routes_nodes_through_the_gateway_and_sets_the_gateway_up() {
        let cfg = config();
        let prefix = Prefix::new(3).unwrap();
        let node = user_data(
            b"",
            &[],
            &cfg,
            true,
            Boot::Node(NetworkBoot {
                prefix,
                default_via: prefix.router(),
            }),
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            node,
            "#cloud-config\nruncmd:\n  - [sh, -c, \"ip route replace default via 10.64.3.1 || true\"]\n"
        );
        let gateway = user_data(
            b"",
            &[],
            &cfg,
            true,
            Boot::Gateway {
                prefix,
                claim_address: true,
            },
        )
        .unwrap()
        .unwrap();
        assert!(gateway.contains("ip addr add 10.64.3.254/24"), "{gateway}");
        assert!(gateway.contains("net.ipv4.ip_forward=1"), "{gateway}");
        assert!(
            gateway.contains("-s 10.64.3.0/24 ! -d 10.64.3.0/24 -j MASQUERADE"),
            "{gateway}"
        );
    }
}
