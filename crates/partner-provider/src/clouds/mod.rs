//! The partner's one seam per cloud: every operation the partner carries out in a cloud
//! account, behind [`CloudOps`], with one implementation per cloud ([`hetzner`], [`vultr`]).
//!
//! The rest of the process speaks in the partner's own terms (marks, sites, prefixes,
//! stable and pool addresses, extra disks, instance references `<cloud>:<id>`) and never
//! names a cloud's resources or API; [`connect`] is the one place that picks the
//! implementation for a [`Cloud`]. A third cloud is one new module here and one arm there.
//! Each module also writes and reads the partner's marks ([`crate::naming`]) in its cloud's
//! form: Hetzner labels and selectors, Vultr tags and `key=value` texts.
//!
//! Invariants of every implementation:
//! - listings answer only what carries this partner's child mark and one of its owned tags
//!   ([`Ownership`]); nothing else in the account is seen or touched;
//! - references it answers start with the cloud's name (`hetzner:42`, `vultr:ab-12`) and it
//!   reads back only its own;
//! - it waits for the cloud's asynchronous actions within the [`Waits`] it is given;
//! - it reads no cloud error's code or message: classification is `orc-cloud`'s
//!   ([`orc_cloud::CloudError::class`]).

pub mod hetzner;
pub mod vultr;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr};
use std::pin::Pin;
use std::time::Duration;

use orc_cloud::CloudError;
use orc_partner::catalog::CatalogSnapshot;
use orc_partner::ids::{Cloud, LocationId, Timestamp};
use orc_partner::params::CloudConfig;
use orc_partner::secret::Secret;

use crate::instances::{Owned, Ownership};
use crate::naming::{Marks, Prefix, ResourceKind, ResourceMarks};
use crate::sites::{PoolAddressHeld, SiteError, StableAddress};

/// A cloud operation in flight.
pub type CloudOp<'a, T, E = CloudError> = Pin<Box<dyn Future<Output = Result<T, E>> + Send + 'a>>;

/// How long a step waits for the cloud's actions, and how often it looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waits {
    pub poll: Duration,
    pub deadline: Duration,
}

impl Waits {
    /// The instant past which a step started now stops waiting.
    pub fn until(self) -> tokio::time::Instant {
        tokio::time::Instant::now() + self.deadline
    }
}

/// One instance the partner holds, with the cloud location it runs in.
#[derive(Debug, Clone)]
pub struct Held {
    pub owned: Owned,
    pub location: String,
}

/// A mark to list instances by: `(key, value)` of [`crate::naming`].
pub type Mark<'a> = (&'a str, &'a str);

/// What a new instance is made of.
#[derive(Debug, Clone)]
pub struct InstanceSpec<'a> {
    /// The instance's hostname-safe name ([`crate::naming::hostname`]).
    pub name: String,
    pub location: &'a str,
    pub plan: &'a str,
    /// The cloud's image (or OS) id.
    pub image: &'a str,
    pub marks: &'a Marks,
    pub user_data: Option<String>,
    /// The sealed SSH key's id in the account.
    pub sealed_key: &'a str,
    /// The cloud's id of the site's private network.
    pub network: &'a str,
    /// A gateway's public address: the site's stable IPv4 reference. Tenant nodes have
    /// none (and no public IPv4 at all).
    pub stable: Option<&'a str>,
}

/// Why a create did not answer the node's instance.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error("the cloud refused the create")]
    Cloud(#[source] CloudError),
    /// The cloud's answer cannot be used (an id the partner cannot read, marks missing, the
    /// name held by another node's instance).
    #[error("{0}")]
    Unusable(&'static str),
}

/// A private network of this partner, read back from its marks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkFound {
    /// The cloud's id of the network.
    pub id: String,
    pub site: String,
    pub prefix: Prefix,
    /// Whether the route `0.0.0.0/0` via the gateway is on it (always, where a cloud has no
    /// route table).
    pub routed: bool,
}

/// A site address (stable IPv4 or pool address) of this partner as its cloud lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressFound {
    pub marks: ResourceMarks,
    /// Its site (from the marks).
    pub site: String,
    /// `<cloud>:<id>`.
    pub id: String,
    /// The address as the cloud writes it.
    pub ip: String,
    /// The cloud location that holds it.
    pub location: String,
    /// The instance it is attached to, `<cloud>:<id>`.
    pub attached_to: Option<String>,
    /// The reverse DNS name, when the listing carries it (empty: none set).
    pub ptr: Option<String>,
    /// A free-text description the cloud keeps beside the marks.
    pub description: Option<String>,
}

/// An extra disk of a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disk {
    /// `<cloud>:<id>`.
    pub id: String,
    pub index: u32,
    /// `<cloud>:<instance id>`.
    pub attached_to: Option<String>,
}

/// Every operation the partner carries out in one cloud account.
pub trait CloudOps: fmt::Debug + Send + Sync {
    /// Requests sent so far per operation.
    fn request_counts(&self) -> BTreeMap<String, u64>;

    /// Forgets the request counts.
    fn reset_counts(&self);

    /// What the account sells now; `mapped` are the locations the region map names.
    fn read_catalog<'a>(
        &'a self,
        mapped: &'a BTreeSet<LocationId>,
        now: Timestamp,
    ) -> CloudOp<'a, CatalogSnapshot>;

    /// The partner's instances whose mark `key` is `value`: one paginated listing.
    fn list_instances<'a>(
        &'a self,
        mark: Mark<'a>,
        ownership: &'a Ownership,
    ) -> CloudOp<'a, Vec<Held>>;

    /// One instance by its id (after `<cloud>:`), when it is the partner's.
    fn get_instance<'a>(
        &'a self,
        id: &'a str,
        ownership: &'a Ownership,
    ) -> CloudOp<'a, Option<Owned>>;

    /// Creates the node's instance and waits until the cloud has made it. A create that
    /// loses the race for the name to another replica answers the instance that won.
    fn create_instance<'a>(
        &'a self,
        spec: InstanceSpec<'a>,
        ownership: &'a Ownership,
        waits: Waits,
    ) -> CloudOp<'a, Owned, CreateError>;

    /// Deletes an instance by its id (after `<cloud>:`).
    fn delete_instance<'a>(&'a self, id: &'a str) -> CloudOp<'a, ()>;

    /// Whether a new instance shows its public address only once it is up, so a deploy
    /// waits for it.
    fn shows_address_late(&self) -> bool;

    /// The partner's private networks: one listing.
    fn networks<'a>(&'a self, ownership: &'a Ownership) -> CloudOp<'a, Vec<NetworkFound>>;

    /// Creates `site`'s private network at `location` with `prefix` (and, where the cloud
    /// routes, the default route via the gateway); answers its id.
    fn create_network<'a>(
        &'a self,
        site: &'a str,
        location: &'a str,
        prefix: Prefix,
        marks: &'a ResourceMarks,
    ) -> CloudOp<'a, String, SiteError>;

    /// Adds the default route via the gateway to a network that lacks it.
    fn add_default_route<'a>(
        &'a self,
        network: &'a NetworkFound,
        waits: Waits,
    ) -> CloudOp<'a, (), SiteError>;

    /// Where a tenant node's default route points: the cloud's router, where it routes to
    /// the gateway, else the gateway itself.
    fn node_default_via(&self, prefix: Prefix) -> Ipv4Addr;

    /// Whether the gateway claims its fixed private address itself at first boot.
    fn gateway_claims_address(&self) -> bool;

    /// Attaches a gateway to its site network at `address`; `false` when it was on it
    /// already (or the create put it there).
    fn attach_gateway_network<'a>(
        &'a self,
        instance: &'a str,
        network: &'a str,
        address: Ipv4Addr,
        waits: Waits,
    ) -> CloudOp<'a, bool, SiteError>;

    /// The partner's site addresses of `kinds` (stable, pool), of `site` when given: one
    /// listing per kind of address the cloud has.
    fn addresses<'a>(
        &'a self,
        ownership: &'a Ownership,
        kinds: &'a [ResourceKind],
        site: Option<&'a str>,
    ) -> CloudOp<'a, Vec<AddressFound>>;

    /// Reserves `site`'s stable IPv4 at `location` (never deleted with an instance).
    fn create_stable<'a>(
        &'a self,
        site: &'a str,
        location: &'a str,
        marks: &'a ResourceMarks,
    ) -> CloudOp<'a, StableAddress, SiteError>;

    /// Records `marks` on a stable address.
    fn mark_stable<'a>(
        &'a self,
        address: &'a StableAddress,
        marks: &'a ResourceMarks,
    ) -> CloudOp<'a, (), SiteError>;

    /// Deletes a stable address.
    fn delete_stable<'a>(&'a self, address: &'a StableAddress) -> CloudOp<'a, (), SiteError>;

    /// Reserves a pool's address at `location`; answers its reference and address.
    fn create_pool_address<'a>(
        &'a self,
        location: &'a str,
        name: String,
        pool: &'a str,
        marks: &'a ResourceMarks,
    ) -> CloudOp<'a, (String, String), SiteError>;

    /// Attaches a pool address to an instance (taking it from another one first).
    fn attach_pool_address<'a>(
        &'a self,
        address: &'a PoolAddressHeld,
        instance: &'a str,
        waits: Waits,
    ) -> CloudOp<'a, (), SiteError>;

    /// Detaches and deletes a pool address; one already gone is success.
    fn delete_pool_address<'a>(
        &'a self,
        address: &'a PoolAddressHeld,
        waits: Waits,
    ) -> CloudOp<'a, (), SiteError>;

    /// Reads the reverse DNS names the address listing did not carry, into `ptr`; answers
    /// the addresses whose names could not be read, with the cloud's answer.
    fn read_reverse_dns<'a>(
        &'a self,
        addresses: &'a mut [crate::inventory::SiteAddress],
    ) -> Pin<Box<dyn Future<Output = BTreeMap<Ipv4Addr, String>> + Send + 'a>>;

    /// Sets the reverse DNS name of an address.
    fn set_reverse_dns<'a>(
        &'a self,
        address: &'a crate::inventory::SiteAddress,
        name: &'a str,
    ) -> CloudOp<'a, ()>;

    /// The ids of the sealed SSH keys of this partner: one listing.
    fn sealed_keys<'a>(&'a self, ownership: &'a Ownership) -> CloudOp<'a, Vec<String>>;

    /// The sealed SSH key's id, created when the account has none.
    fn ensure_sealed_key<'a>(
        &'a self,
        marks: &'a ResourceMarks,
        name: &'a str,
        public: &'a str,
    ) -> CloudOp<'a, String, SiteError>;

    /// The extra disks of `node`: one listing.
    fn node_disks<'a>(&'a self, node: &'a str, ownership: &'a Ownership) -> CloudOp<'a, Vec<Disk>>;

    /// Creates an extra disk attached to `instance`.
    fn create_disk<'a>(
        &'a self,
        instance: &'a str,
        location: &'a str,
        name: String,
        size_gib: u32,
        marks: &'a ResourceMarks,
        waits: Waits,
    ) -> CloudOp<'a, (), SiteError>;

    /// Attaches an extra disk to `instance`.
    fn attach_disk<'a>(
        &'a self,
        disk: &'a Disk,
        instance: &'a str,
        waits: Waits,
    ) -> CloudOp<'a, ()>;

    /// Detaches (when attached) and deletes an extra disk; `false` when it went away on
    /// its own meanwhile.
    fn delete_disk<'a>(&'a self, disk: &'a Disk, waits: Waits) -> CloudOp<'a, bool>;
}

/// The client of `cloud` with `key`, built from its config. Touches no network.
pub fn connect(
    cloud: Cloud,
    config: &CloudConfig,
    key: &Secret,
) -> Result<Box<dyn CloudOps>, CloudError> {
    let endpoint = config.endpoint.as_str();
    Ok(match cloud {
        Cloud::Hetzner => Box::new(hetzner::Hetzner::new(key, endpoint)?),
        Cloud::Vultr => Box::new(vultr::Vultr::new(key, endpoint)?),
    })
}

/// The cloud and id of a reference `<cloud>:<id>`.
pub fn split_ref(reference: &str) -> Option<(Cloud, &str)> {
    let (cloud, id) = reference.split_once(':')?;
    Some((Cloud::parse(cloud)?, id))
}

/// The id after `<cloud>:` (the whole text when there is no prefix).
pub(crate) fn id_of(reference: &str) -> &str {
    reference.split_once(':').map_or(reference, |(_, id)| id)
}

/// A reference's numeric id, or why it cannot be used.
pub(crate) fn numeric_id(reference: &str) -> Result<u64, SiteError> {
    id_of(reference)
        .parse()
        .map_err(|_| SiteError::BadAddress(reference.to_string()))
}

/// An address the cloud answered, as IPv4.
pub(crate) fn parse_v4(text: &str) -> Result<Ipv4Addr, SiteError> {
    text.parse()
        .map_err(|_| SiteError::BadAddress(text.to_string()))
}

/// The first public address of an instance, when it is a real one.
pub(crate) fn public_address(text: &str) -> Option<IpAddr> {
    let ip: IpAddr = text.parse().ok()?;
    (!ip.is_unspecified()).then_some(ip)
}
