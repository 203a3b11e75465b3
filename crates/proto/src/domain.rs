//! Typed values of the provider protocol, free of prost's `Option`s and integer enums.
//!
//! Invariants a domain value always holds (the wire conversions enforce them):
//! ids are non-empty, enums are never "unspecified", money is a decimal with currency and
//! period, an absent price means *unpriced* (not free), and an [`Inventory`] is complete.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
#[cfg(test)]
use std::time::Duration;
use std::time::SystemTime;

use orc_common::{Money, Shape};

use crate::ids::{
    ClassId, InstanceRef, NodeId, OsId, PoolPath, ProviderName, QuoteToken, RequestId, ResourceUri,
    SiteName,
};

pub use orc_common::kinds::{Purpose, RefusalKind, ReplicaRole, Whereabouts, ZoneAction};

/// A refusal: the kind the zone acts on and the provider's generic words for the tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub kind: RefusalKind,
    /// Generic tenant-facing words; they never name a cloud, plan or city.
    pub words: String,
}

impl Refusal {
    /// A refusal of `kind` with `words`.
    pub fn new(kind: RefusalKind, words: impl Into<String>) -> Self {
        Refusal {
            kind,
            words: words.into(),
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.words)
    }
}

/// Where a replica runs, so operators can tell replicas apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica {
    pub host: String,
    pub pid: u32,
    /// Slot within the replica's app pool; 0 when not run as an app.
    pub slot: u32,
}

/// The first message of every stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    pub provider: ProviderName,
    pub resource_uri: ResourceUri,
    pub replica: Replica,
    /// The provider's software version.
    pub version: String,
    pub protocol_version: u32,
}

/// A region class the provider offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassInfo {
    pub id: ClassId,
    pub title: String,
    /// What a tenant may ask for in the class, stock aside; empty when not listed.
    pub offerings: Vec<Offering>,
}

/// One thing a tenant may ask for in a class: a shape and, where the provider names it,
/// its plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offering {
    /// vCPUs, memory and architecture; no extra disks.
    pub shape: Shape,
    /// The provider's own name (a one-cloud provider's plan, `cx23`); `None` when the
    /// provider picks the plan itself.
    pub plan: Option<String>,
}

/// An operating system the provider offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OsInfo {
    pub id: OsId,
    pub title: String,
}

/// Whether a class can take a node right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassAvailability {
    pub class: ClassId,
    pub can_place: bool,
}

/// What the provider can offer now, independent of any shape.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Availability {
    /// One entry per class, sorted by class id.
    pub classes: Vec<ClassAvailability>,
    /// Public IPv4 addresses offered to public pools, in total.
    pub public_ipv4_offered: u32,
}

/// The provider's capabilities, sent after hello and whenever they change.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Catalog {
    pub classes: Vec<ClassInfo>,
    pub os: Vec<OsInfo>,
    pub availability: Availability,
    /// Every site needs one gateway node while it has a tenant node; the zone keeps pool
    /// `sys/sys/gw-<site>` at one gateway for each such site (the partner's sites).
    pub site_gateways: bool,
}

/// The zone asks what a node would cost, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quote {
    pub pool: PoolPath,
    pub node_id: NodeId,
    pub purpose: Purpose,
    pub shape: Shape,
    pub class: ClassId,
    pub os: OsId,
    /// The only site the node may go to (a public pool's pinned site).
    pub pinned_site: Option<SiteName>,
    /// The pool has a public address.
    pub public: bool,
    /// Provider-specific placement of a pool placed directly on one cloud
    /// (`plan` → `cx23`); empty for pools that leave the choice to the provider.
    pub placement: BTreeMap<String, String>,
    /// A preview: answered like any quote, but nothing is held for it and its token is
    /// never deployed.
    pub preview: bool,
}

/// A provider's offer for one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offer {
    pub site: SiteName,
    /// `None`: the node is unpriced.
    pub price: Option<Money>,
    /// Tenant price line, e.g. `2 vCPU · 4 GiB · eu-central`.
    pub words: String,
    pub quote_token: QuoteToken,
    /// After this instant the token is no longer honoured.
    pub expires: SystemTime,
}

/// The answer to a [`Quote`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuoteReply {
    Offer(Offer),
    Refused(Refusal),
}

/// Opaque first-boot payload for a node. Sensitive: its `Debug` shows only its length.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Bootstrap(pub Vec<u8>);

impl fmt::Debug for Bootstrap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Bootstrap(<{} bytes>)", self.0.len())
    }
}

/// The zone accepts an offer: create the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deploy {
    pub node_id: NodeId,
    pub quote_token: QuoteToken,
    pub os: OsId,
    /// OpenSSH public keys.
    pub ssh_keys: Vec<String>,
    pub bootstrap: Bootstrap,
}

/// A progress note during a deploy, in tenant words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeployProgress {
    pub node_id: NodeId,
    pub words: String,
    /// The machine's SMBIOS product UUID, which the zone binds the node's join token to.
    pub product_uuid: Option<String>,
}

/// A node that now exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deployed {
    pub node_id: NodeId,
    pub site: SiteName,
    pub addresses: Vec<IpAddr>,
    /// `None`: unpriced.
    pub price: Option<Money>,
    pub instance_ref: InstanceRef,
    /// Where the instance is, in the cloud's terms (for the zone's operators only).
    pub placed: Option<Whereabouts>,
}

/// The outcome of a [`Deploy`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeployResult {
    Deployed(Deployed),
    Refused(Refusal),
}

/// The outcome of a [`Destroy`]. Destroying a node the provider does not hold succeeds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DestroyResult {
    Destroyed,
    Refused(Refusal),
}

/// The zone asks for a node to be gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destroy {
    pub node_id: NodeId,
}

/// The state of a node's instance as its provider sees it (the zone's own life of a node is the
/// model's `NodeState`; the wire keeps the name `NodeState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum InstanceState {
    Provisioning,
    Running,
    Stopped,
    Deleting,
}

/// One node in an inventory report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InventoryNode {
    pub node_id: NodeId,
    pub site: SiteName,
    pub instance_ref: InstanceRef,
    pub state: InstanceState,
}

/// One open site in an inventory report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InventorySite {
    pub site: SiteName,
    pub public_ipv4: Option<Ipv4Addr>,
    /// The site's private prefix in CIDR notation.
    pub private_prefix: Option<String>,
}

/// The complete list of nodes and sites a provider holds.
///
/// Only complete reports exist: a provider that could not read everything sends none, so
/// the zone may mark as lost every node it believes running that is missing here.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Inventory {
    pub nodes: Vec<InventoryNode>,
    pub sites: Vec<InventorySite>,
    /// Public pools' addresses, one per public pool that has one.
    pub pool_addresses: Vec<PoolAddress>,
}

/// A public pool's IPv4 at one site; the zone pins the pool's quotes to that site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolAddress {
    pub pool: PoolPath,
    pub site: SiteName,
    pub ipv4: Ipv4Addr,
}

/// A message from the provider, in an envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderMessage {
    pub request_id: RequestId,
    pub body: ProviderBody,
}

/// What a provider sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderBody {
    Hello(Hello),
    Catalog(Catalog),
    QuoteReply { node_id: NodeId, reply: QuoteReply },
    DeployProgress(DeployProgress),
    DeployDone(Deployed),
    DeployRefused { node_id: NodeId, refusal: Refusal },
    DestroyDone { node_id: NodeId },
    DestroyRefused { node_id: NodeId, refusal: Refusal },
    Inventory(Inventory),
    KeepAlive,
}

impl ProviderBody {
    /// True for the last message of a request (a reply that ends it).
    pub fn is_final_reply(&self) -> bool {
        match self {
            ProviderBody::QuoteReply { .. }
            | ProviderBody::DeployDone(_)
            | ProviderBody::DeployRefused { .. }
            | ProviderBody::DestroyDone { .. }
            | ProviderBody::DestroyRefused { .. } => true,
            ProviderBody::Hello(_)
            | ProviderBody::Catalog(_)
            | ProviderBody::DeployProgress(_)
            | ProviderBody::Inventory(_)
            | ProviderBody::KeepAlive => false,
        }
    }
}

/// A message from the zone, in an envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneMessage {
    pub request_id: RequestId,
    pub body: ZoneBody,
}

/// What the zone sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ZoneBody {
    Welcome { role: ReplicaRole },
    RoleChange { role: ReplicaRole },
    Quote(Quote),
    Deploy(Deploy),
    Destroy(Destroy),
    KeepAlive,
}

impl DeployResult {
    /// Wraps the result for the wire.
    pub fn into_body(self, node_id: NodeId) -> ProviderBody {
        match self {
            DeployResult::Deployed(done) => ProviderBody::DeployDone(done),
            DeployResult::Refused(refusal) => ProviderBody::DeployRefused { node_id, refusal },
        }
    }
}

impl DestroyResult {
    /// Wraps the result for the wire.
    pub fn into_body(self, node_id: NodeId) -> ProviderBody {
        match self {
            DestroyResult::Destroyed => ProviderBody::DestroyDone { node_id },
            DestroyResult::Refused(refusal) => ProviderBody::DestroyRefused { node_id, refusal },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusal_kinds_map_to_zone_actions() {
        let actions: Vec<_> = RefusalKind::ALL.iter().map(|k| k.zone_action()).collect();
        assert_eq!(
            actions,
            vec![
                ZoneAction::ParkAndRetryLater,
                ZoneAction::RetryAfter(Duration::from_secs(5)),
                ZoneAction::RetryWithBackoff,
                ZoneAction::ParkUntilConfigChanges,
                ZoneAction::NormalBackoff,
                ZoneAction::RefuseAtCreation,
            ]
        );
        assert_eq!(RefusalKind::OperatorFix.to_string(), "operator_fix");
    }

    #[test]
    fn bootstrap_debug_hides_content() {
        let b = Bootstrap(b"join-token-secret".to_vec());
        assert_eq!(format!("{b:?}"), "Bootstrap(<17 bytes>)");
    }
}
