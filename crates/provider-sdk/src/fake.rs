//! An in-memory provider: deterministic, with refusals, delays and failures on demand.
//!
//! [`FakeCloud`] plays the cloud: it holds the instances and the injected faults, and is
//! shared by every [`FakeProvider`] built on it, the way replicas of a real provider share
//! one cloud account. The provider itself keeps nothing, so a fresh `FakeProvider` on the
//! same cloud finds the instances an earlier one made (what the conformance cases check).
//!
//! Like a real cloud client, deploy looks the node up and then creates it after the deploy
//! delay, without holding a lock across the wait: two deploys of one node racing each other
//! make two instances. The runner must prevent that; the fake makes it visible.
//!
//! Everything is deterministic: instance refs count up (`fake-000001`), addresses come
//! from the documentation range 192.0.2.0/24, and offers expire at a fixed instant.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use orc_common::{Money, Whereabouts};
use orc_proto::{
    Availability, Catalog, ClassAvailability, ClassId, ClassInfo, Deploy, DeployResult, Deployed,
    DestroyResult, InstanceRef, InstanceState, Inventory, InventoryNode, InventorySite, NodeId,
    Offer, OsId, OsInfo, ProviderName, Quote, QuoteReply, QuoteToken, Refusal, RefusalKind,
    Replica, ReplicaRole, ResourceUri, SiteName,
};
use rust_decimal::Decimal;

use crate::provider::{HelloInfo, ProgressSink, Provider};

/// Which classes, sites and systems a fake provider offers, and at what price.
#[derive(Debug, Clone)]
pub struct FakeConfig {
    pub provider: ProviderName,
    pub resource_uri: ResourceUri,
    pub replica: Replica,
    /// Classes with their titles and ordered sites.
    pub classes: Vec<(ClassId, String, Vec<SiteName>)>,
    pub os: Vec<(OsId, String)>,
    /// Monthly USD price per vCPU; `None` quotes unpriced nodes.
    pub price_per_vcpu_month: Option<Decimal>,
    pub public_ipv4_offered: u32,
    /// Whether its sites need gateways (as the partner's do).
    pub site_gateways: bool,
}

impl Default for FakeConfig {
    fn default() -> Self {
        let id = |s: &str| SiteName::new(s).unwrap_or_else(|_| unreachable!("non-empty"));
        FakeConfig {
            provider: ProviderName::new("fake").unwrap_or_else(|_| unreachable!("non-empty")),
            resource_uri: ResourceUri::new("urn:orc:fake:test")
                .unwrap_or_else(|_| unreachable!("non-empty")),
            replica: Replica {
                host: "localhost".into(),
                pid: std::process::id(),
                slot: 0,
            },
            classes: vec![
                (
                    ClassId::new("eu-central").unwrap_or_else(|_| unreachable!("non-empty")),
                    "Europe Central".into(),
                    vec![id("eu-central-a"), id("eu-central-b")],
                ),
                (
                    ClassId::new("us-east").unwrap_or_else(|_| unreachable!("non-empty")),
                    "US East".into(),
                    vec![id("us-east-a")],
                ),
            ],
            os: vec![(
                OsId::new("debian-12").unwrap_or_else(|_| unreachable!("non-empty")),
                "Debian 12".into(),
            )],
            price_per_vcpu_month: Some(Decimal::new(250, 2)),
            public_ipv4_offered: 4,
            site_gateways: false,
        }
    }
}

/// An instance in the fake cloud.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeInstance {
    pub node_id: NodeId,
    pub site: SiteName,
    pub instance_ref: InstanceRef,
    pub address: IpAddr,
    pub price: Option<Money>,
    /// The SSH keys the deploy asked the instance to install.
    pub ssh_keys: Vec<String>,
    /// The bootstrap the deploy carried (the zone's script, with the node's join token).
    pub bootstrap: Vec<u8>,
}

/// A failure injected into the next deploy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeployFault {
    /// Refuse before creating anything.
    RefuseBeforeCreate(Refusal),
    /// Create the instance, then report the refusal (as if the answer were lost).
    FailAfterCreate(Refusal),
}

#[derive(Debug, Default)]
struct CloudState {
    /// Instances by node id; more than one under a key is a duplicate.
    instances: BTreeMap<NodeId, Vec<FakeInstance>>,
    next_ref: u64,
    creates: u64,
    deletes: u64,
    class_refusals: BTreeMap<ClassId, Refusal>,
    node_refusals: BTreeMap<NodeId, Refusal>,
    deploy_faults: VecDeque<DeployFault>,
    destroy_faults: VecDeque<Refusal>,
    deploy_delay: Duration,
    quote_delay: Duration,
    inventory_unreadable: bool,
}

/// The fake cloud shared by fake providers. All control methods take effect at once.
#[derive(Debug, Default)]
pub struct FakeCloud {
    state: Mutex<CloudState>,
}

impl FakeCloud {
    /// An empty cloud with no delays and no faults.
    pub fn new() -> Arc<FakeCloud> {
        Arc::new(FakeCloud::default())
    }

    fn state(&self) -> MutexGuard<'_, CloudState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every instance, duplicates included, by node id then creation order.
    pub fn instances(&self) -> Vec<FakeInstance> {
        self.state().instances.values().flatten().cloned().collect()
    }

    /// How many instances exist for `node_id` (more than one is a duplicate).
    pub fn instance_count(&self, node_id: &NodeId) -> usize {
        self.state().instances.get(node_id).map_or(0, Vec::len)
    }

    /// Instances created since start.
    pub fn creates(&self) -> u64 {
        self.state().creates
    }

    /// Instances deleted since start.
    pub fn deletes(&self) -> u64 {
        self.state().deletes
    }

    /// Quotes for `class` are refused with `refusal` (`None` lifts it).
    pub fn refuse_class(&self, class: ClassId, refusal: Option<Refusal>) {
        let mut state = self.state();
        match refusal {
            Some(r) => state.class_refusals.insert(class, r),
            None => state.class_refusals.remove(&class),
        };
    }

    /// Quotes for `node_id` are refused with `refusal` (`None` lifts it).
    pub fn refuse_node(&self, node_id: NodeId, refusal: Option<Refusal>) {
        let mut state = self.state();
        match refusal {
            Some(r) => state.node_refusals.insert(node_id, r),
            None => state.node_refusals.remove(&node_id),
        };
    }

    /// The next deploy that would create an instance meets `fault`.
    pub fn push_deploy_fault(&self, fault: DeployFault) {
        self.state().deploy_faults.push_back(fault);
    }

    /// The next destroy is refused with `refusal`.
    pub fn push_destroy_fault(&self, refusal: Refusal) {
        self.state().destroy_faults.push_back(refusal);
    }

    /// Creating an instance takes `delay` (tokio time).
    pub fn set_deploy_delay(&self, delay: Duration) {
        self.state().deploy_delay = delay;
    }

    /// Answering a quote takes `delay` (tokio time).
    pub fn set_quote_delay(&self, delay: Duration) {
        self.state().quote_delay = delay;
    }

    /// While set, inventory cannot be read completely and none is reported.
    pub fn set_inventory_unreadable(&self, unreadable: bool) {
        self.state().inventory_unreadable = unreadable;
    }
}

/// The fixed expiry of every fake offer (2033-05-18).
pub const OFFER_EXPIRES: Duration = Duration::from_secs(2_000_000_000);

/// A stateless provider over a [`FakeCloud`].
#[derive(Debug)]
pub struct FakeProvider {
    cloud: Arc<FakeCloud>,
    config: FakeConfig,
    roles: Mutex<Vec<ReplicaRole>>,
}

impl FakeProvider {
    /// A provider with the default config over `cloud`.
    pub fn new(cloud: Arc<FakeCloud>) -> FakeProvider {
        FakeProvider::with_config(cloud, FakeConfig::default())
    }

    /// A provider with `config` over `cloud`.
    pub fn with_config(cloud: Arc<FakeCloud>, config: FakeConfig) -> FakeProvider {
        FakeProvider {
            cloud,
            config,
            roles: Mutex::new(Vec::new()),
        }
    }

    /// The cloud this provider works on.
    pub fn cloud(&self) -> &Arc<FakeCloud> {
        &self.cloud
    }

    /// Every role the zone has given this replica, in order.
    pub fn roles(&self) -> Vec<ReplicaRole> {
        self.roles
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn class_sites(&self, class: &ClassId) -> Option<&[SiteName]> {
        self.config
            .classes
            .iter()
            .find(|(id, _, _)| id == class)
            .map(|(_, _, sites)| sites.as_slice())
    }

    fn price(&self, vcpus: u32) -> Option<Money> {
        self.config
            .price_per_vcpu_month
            .map(|per_vcpu| Money::usd_per_month(per_vcpu * Decimal::from(vcpus)))
    }

    fn token(node_id: &NodeId, site: &SiteName, vcpus: u32) -> String {
        format!("fake:{vcpus}:{site}:{node_id}")
    }

    /// Reads back `(vcpus, site)` from a token made for `node_id`.
    fn read_token(token: &QuoteToken, node_id: &NodeId) -> Option<(u32, SiteName)> {
        let rest = token.as_str().strip_prefix("fake:")?;
        let (vcpus, rest) = rest.split_once(':')?;
        let (site, node) = rest.split_once(':')?;
        if node != node_id.as_str() {
            return None;
        }
        Some((vcpus.parse().ok()?, SiteName::new(site).ok()?))
    }

    fn deployed(instance: &FakeInstance) -> DeployResult {
        DeployResult::Deployed(Deployed {
            node_id: instance.node_id.clone(),
            site: instance.site.clone(),
            addresses: vec![instance.address],
            price: instance.price,
            instance_ref: instance.instance_ref.clone(),
            placed: Some(Whereabouts {
                cloud: "fake".to_string(),
                location: instance.site.to_string(),
                plan: String::new(),
            }),
        })
    }
}

fn operator_fix(words: &str) -> QuoteReply {
    QuoteReply::Refused(Refusal::new(RefusalKind::OperatorFix, words))
}

impl Provider for FakeProvider {
    fn hello(&self) -> HelloInfo {
        HelloInfo {
            provider: self.config.provider.clone(),
            resource_uri: self.config.resource_uri.clone(),
            replica: self.config.replica.clone(),
            version: env!("CARGO_PKG_VERSION").to_string(),
        }
    }

    async fn catalog(&self) -> Catalog {
        let refused: BTreeSet<ClassId> =
            self.cloud.state().class_refusals.keys().cloned().collect();
        let mut availability: Vec<ClassAvailability> = self
            .config
            .classes
            .iter()
            .map(|(id, _, _)| ClassAvailability {
                class: id.clone(),
                can_place: !refused.contains(id),
            })
            .collect();
        availability.sort_by(|a, b| a.class.cmp(&b.class));
        Catalog {
            classes: self
                .config
                .classes
                .iter()
                .map(|(id, title, _)| ClassInfo {
                    id: id.clone(),
                    title: title.clone(),
                    offerings: Vec::new(),
                })
                .collect(),
            os: self
                .config
                .os
                .iter()
                .map(|(id, title)| OsInfo {
                    id: id.clone(),
                    title: title.clone(),
                })
                .collect(),
            availability: Availability {
                classes: availability,
                public_ipv4_offered: self.config.public_ipv4_offered,
            },
            site_gateways: self.config.site_gateways,
        }
    }

    async fn quote(&self, quote: Quote) -> QuoteReply {
        let (delay, refusal) = {
            let state = self.cloud.state();
            let refusal = state
                .node_refusals
                .get(&quote.node_id)
                .or_else(|| state.class_refusals.get(&quote.class))
                .cloned();
            (state.quote_delay, refusal)
        };
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        if let Some(refusal) = refusal {
            return QuoteReply::Refused(refusal);
        }
        let Some(sites) = self.class_sites(&quote.class) else {
            return operator_fix("This region is not offered.");
        };
        // A gateway boots the provider's own image, whatever OS id it is asked for.
        if quote.purpose == orc_proto::Purpose::Tenant
            && !self.config.os.iter().any(|(id, _)| id == &quote.os)
        {
            return operator_fix("This operating system is not offered.");
        }
        let site = match &quote.pinned_site {
            Some(pinned) if sites.contains(pinned) => pinned.clone(),
            Some(_) => {
                return QuoteReply::Refused(Refusal::new(
                    RefusalKind::NoCapacity,
                    "The pool's site cannot take another node right now.",
                ));
            }
            None => match sites.first() {
                Some(site) => site.clone(),
                None => return operator_fix("This region has no site."),
            },
        };
        let token = Self::token(&quote.node_id, &site, quote.shape.vcpus);
        QuoteReply::Offer(Offer {
            price: self.price(quote.shape.vcpus),
            words: format!("{} · {}", quote.shape, quote.class),
            quote_token: QuoteToken::new(token).unwrap_or_else(|_| unreachable!("non-empty")),
            expires: UNIX_EPOCH + OFFER_EXPIRES,
            site,
        })
    }

    async fn deploy(&self, deploy: Deploy, progress: ProgressSink) -> DeployResult {
        let Some((vcpus, site)) = Self::read_token(&deploy.quote_token, &deploy.node_id) else {
            return DeployResult::Refused(Refusal::new(
                RefusalKind::Failed,
                "This offer is no longer valid.",
            ));
        };
        let (existing, fault, delay) = {
            let mut state = self.cloud.state();
            let existing = state
                .instances
                .get(&deploy.node_id)
                .and_then(|found| found.first())
                .cloned();
            let fault = match existing {
                Some(_) => None,
                None => state.deploy_faults.pop_front(),
            };
            (existing, fault, state.deploy_delay)
        };
        if let Some(instance) = existing {
            return Self::deployed(&instance);
        }
        if let Some(DeployFault::RefuseBeforeCreate(refusal)) = &fault {
            return DeployResult::Refused(refusal.clone());
        }
        progress.note("Creating the machine.").await;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let instance = {
            let mut state = self.cloud.state();
            state.next_ref += 1;
            state.creates += 1;
            let n = state.next_ref;
            let instance = FakeInstance {
                node_id: deploy.node_id.clone(),
                site,
                instance_ref: InstanceRef::new(format!("fake-{n:06}"))
                    .unwrap_or_else(|_| unreachable!("non-empty")),
                address: IpAddr::V4(Ipv4Addr::new(192, 0, 2, (n % 250 + 1) as u8)),
                price: self.price(vcpus),
                ssh_keys: deploy.ssh_keys.clone(),
                bootstrap: deploy.bootstrap.0.clone(),
            };
            state
                .instances
                .entry(instance.node_id.clone())
                .or_default()
                .push(instance.clone());
            instance
        };
        if let Some(DeployFault::FailAfterCreate(refusal)) = fault {
            return DeployResult::Refused(refusal);
        }
        progress.note("The machine is up.").await;
        Self::deployed(&instance)
    }

    async fn destroy(&self, node_id: NodeId) -> DestroyResult {
        let mut state = self.cloud.state();
        if let Some(refusal) = state.destroy_faults.pop_front() {
            return DestroyResult::Refused(refusal);
        }
        let removed = state
            .instances
            .remove(&node_id)
            .map_or(0, |found| found.len());
        state.deletes += removed as u64;
        DestroyResult::Destroyed
    }

    async fn inventory(&self) -> Option<Inventory> {
        let state = self.cloud.state();
        if state.inventory_unreadable {
            return None;
        }
        let nodes: Vec<InventoryNode> = state
            .instances
            .values()
            .flatten()
            .map(|i| InventoryNode {
                node_id: i.node_id.clone(),
                site: i.site.clone(),
                instance_ref: i.instance_ref.clone(),
                state: InstanceState::Running,
            })
            .collect();
        let sites: BTreeSet<SiteName> = state
            .instances
            .values()
            .flatten()
            .map(|i| i.site.clone())
            .collect();
        Some(Inventory {
            nodes,
            sites: sites
                .into_iter()
                .map(|site| InventorySite {
                    site,
                    public_ipv4: None,
                    private_prefix: None,
                })
                .collect(),
            pool_addresses: Vec::new(),
        })
    }

    fn on_role(&self, role: ReplicaRole) {
        self.roles
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(role);
    }
}

/// Time a fake offer expires, as a `SystemTime`.
pub fn offer_expiry() -> SystemTime {
    UNIX_EPOCH + OFFER_EXPIRES
}

#[cfg(test)]
mod tests {
    use super::*;
    use orc_common::{Period, Shape};
    use orc_proto::{Bootstrap, PoolPath, Purpose};

    fn quote(node: &str) -> Quote {
        Quote {
            pool: PoolPath::new("acme/web/app").unwrap(),
            node_id: NodeId::new(node).unwrap(),
            purpose: Purpose::Tenant,
            shape: Shape {
                vcpus: 2,
                memory_gib: 4,
                arch: Default::default(),
                disks_gib: vec![],
            },
            class: ClassId::new("eu-central").unwrap(),
            os: OsId::new("debian-12").unwrap(),
            pinned_site: None,
            public: false,
            placement: Default::default(),
            preview: false,
        }
    }

    #[tokio::test]
    async fn quotes_the_first_site_with_a_price_line() {
        let provider = FakeProvider::new(FakeCloud::new());
        let QuoteReply::Offer(offer) = provider.quote(quote("n1")).await else {
            panic!("expected an offer");
        };
        assert_eq!(offer.site.as_str(), "eu-central-a");
        assert_eq!(offer.words, "2 vCPU · 4 GiB · eu-central");
        assert_eq!(
            offer.price,
            Some(Money::usd_per_month(Decimal::new(500, 2)))
        );
        assert_eq!(offer.expires, offer_expiry());
        assert_eq!(offer.price.map(|p| p.period), Some(Period::Month));
    }

    #[tokio::test]
    async fn unknown_class_and_os_need_an_operator() {
        let provider = FakeProvider::new(FakeCloud::new());
        let mut q = quote("n1");
        q.class = ClassId::new("mars").unwrap();
        assert_eq!(
            provider.quote(q).await,
            operator_fix("This region is not offered.")
        );
        let mut q = quote("n1");
        q.os = OsId::new("plan9").unwrap();
        assert_eq!(
            provider.quote(q).await,
            operator_fix("This operating system is not offered.")
        );
    }

    #[tokio::test]
    async fn ten_thousand_nodes_inventory_in_node_order() {
        let provider = FakeProvider::new(FakeCloud::new());
        for n in (0..10_000).rev() {
            let id = format!("n{n:05}");
            let QuoteReply::Offer(offer) = provider.quote(quote(&id)).await else {
                panic!("expected an offer for {id}");
            };
            let node_id = NodeId::new(id).unwrap();
            let deploy = Deploy {
                node_id: node_id.clone(),
                quote_token: offer.quote_token,
                os: OsId::new("debian-12").unwrap(),
                ssh_keys: vec![],
                bootstrap: Bootstrap::default(),
            };
            let result = provider
                .deploy(deploy, ProgressSink::discard(node_id))
                .await;
            assert!(matches!(result, DeployResult::Deployed(_)));
        }
        let inventory = provider.inventory().await.unwrap();
        assert_eq!(inventory.nodes.len(), 10_000);
        assert_eq!(inventory.nodes[0].node_id.as_str(), "n00000");
        assert_eq!(inventory.nodes[9_999].node_id.as_str(), "n09999");
        assert_eq!(inventory.nodes[0].instance_ref.as_str(), "fake-010000");
        let sites: Vec<&str> = inventory.sites.iter().map(|s| s.site.as_str()).collect();
        assert_eq!(sites, vec!["eu-central-a"]);
        assert_eq!(provider.cloud().creates(), 10_000);
    }

    #[tokio::test]
    async fn deploy_refuses_a_token_for_another_node() {
        let provider = FakeProvider::new(FakeCloud::new());
        let QuoteReply::Offer(offer) = provider.quote(quote("n1")).await else {
            panic!("expected an offer");
        };
        let node = NodeId::new("n2").unwrap();
        let result = provider
            .deploy(
                Deploy {
                    node_id: node.clone(),
                    quote_token: offer.quote_token,
                    os: OsId::new("debian-12").unwrap(),
                    ssh_keys: vec![],
                    bootstrap: Bootstrap::default(),
                },
                ProgressSink::discard(node.clone()),
            )
            .await;
        assert_eq!(
            result,
            DeployResult::Refused(Refusal::new(
                RefusalKind::Failed,
                "This offer is no longer valid."
            ))
        );
        assert_eq!(provider.cloud().creates(), 0);
    }
}
