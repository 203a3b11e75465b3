//! The one-cloud machine model: what a standalone provider offers, creates and manages.
//!
//! Plain data and one trait, [`MachineProvider`], that each cloud (Hetzner Cloud, Vultr,
//! Hetzner Robot) implements against its account. Nothing here performs I/O or knows the
//! provider protocol; the [adapter](super::MachineAdapter) turns the model into a
//! [`Provider`](crate::Provider). A machine is found again by its [`MachineKey`], so every
//! create is idempotent.

use std::fmt;
use std::future::Future;
use std::net::IpAddr;

use orc_common::{Architecture, Money};

use super::MachineError;

/// The idempotency key of a machine: the zone's node id, recorded on the machine (label,
/// tag or name) so the machine is found again after a restart or a failover.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MachineKey(String);

impl MachineKey {
    /// Wraps a key; it must be non-empty (`None` otherwise).
    pub fn new(key: impl Into<String>) -> Option<Self> {
        let key = key.into();
        (!key.is_empty()).then_some(MachineKey(key))
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for MachineKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What offers to list.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OfferQuery {
    /// Only this location (region); `None`: every location the account can use.
    pub location: Option<String>,
    /// GPU machines are asked for.
    pub gpu: bool,
    /// Bare-metal machines are asked for.
    pub metal: bool,
}

/// One plan at one location, with its price.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineOffer {
    /// The cloud's plan id (`cx23`, `vc2-1c-1gb`).
    pub plan: String,
    /// The cloud's location id (`fsn1`, `ewr`).
    pub location: String,
    pub vcpus: u32,
    /// Memory in MiB (clouds give fractions of a GiB for small plans).
    pub memory_mib: u64,
    pub arch: Architecture,
    /// Included disk in GB.
    pub disk_gb: u64,
    /// Hourly price in the cloud's currency (Hetzner: gross EUR, Vultr: USD).
    pub hourly: Money,
    /// Monthly cap or price, when the cloud states one.
    pub monthly: Option<Money>,
    /// The location can take this plan now.
    pub available: bool,
}

impl MachineOffer {
    /// True when the offer has exactly `vcpus`, `memory_gib` and `arch`.
    pub fn matches(&self, vcpus: u32, memory_gib: u32, arch: Architecture) -> bool {
        self.vcpus == vcpus && self.memory_mib == u64::from(memory_gib) * 1024 && self.arch == arch
    }
}

/// What to create.
#[derive(Clone, PartialEq, Eq)]
pub struct MachineSpec {
    /// Recorded on the machine; a create with a key that exists returns that machine.
    pub idempotency_key: MachineKey,
    /// Hostname-safe name, at most 63 characters ([`hostname_for`]).
    pub name: String,
    pub location: String,
    pub plan: String,
    /// The cloud's image (OS) id.
    pub image: String,
    /// OpenSSH public keys to install for root.
    pub ssh_keys: Vec<String>,
    /// First-boot user data (cloud-init), when any.
    pub user_data: Option<String>,
}

impl fmt::Debug for MachineSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MachineSpec")
            .field("idempotency_key", &self.idempotency_key)
            .field("name", &self.name)
            .field("location", &self.location)
            .field("plan", &self.plan)
            .field("image", &self.image)
            .field("ssh_keys", &self.ssh_keys.len())
            .field(
                "user_data",
                &self
                    .user_data
                    .as_ref()
                    .map(|u| format!("<{} bytes>", u.len())),
            )
            .finish()
    }
}

/// What a machine that takes no user data needs to join the zone, handed to
/// [`MachineProvider::install`] after its create.
#[derive(Clone)]
pub struct Install {
    /// The zone's bootstrap as it came with the deploy: a first-boot script that carries the
    /// node's join token (`orc_proto::bootstrap` takes it apart).
    pub bootstrap: orc_common::Secret,
    /// The machine's host name ([`hostname_for`]).
    pub hostname: String,
    /// OpenSSH public keys to install for root.
    pub ssh_keys: Vec<String>,
}

impl fmt::Debug for Install {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Install")
            .field("bootstrap", &"<redacted>")
            .field("hostname", &self.hostname)
            .field("ssh_keys", &self.ssh_keys.len())
            .finish()
    }
}

/// The state of a machine as its cloud reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MachineState {
    Provisioning,
    Running,
    Stopped,
    Deleting,
}

/// A machine this provider manages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    pub key: MachineKey,
    /// The cloud's id of the machine (server id, instance id).
    pub instance_ref: String,
    pub name: String,
    pub location: String,
    pub plan: String,
    pub state: MachineState,
    /// Public addresses, IPv4 first.
    pub addresses: Vec<IpAddr>,
}

/// A power operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PowerAction {
    /// Power on.
    On,
    /// Cut the power.
    Off,
    /// Ask the OS to shut down.
    GracefulOff,
    /// Hard reset.
    Reset,
    /// Power off, then on.
    Cycle,
    /// Ask the OS to reboot.
    GracefulRestart,
}

impl PowerAction {
    /// Every action, in declaration order.
    pub const ALL: [PowerAction; 6] = [
        PowerAction::On,
        PowerAction::Off,
        PowerAction::GracefulOff,
        PowerAction::Reset,
        PowerAction::Cycle,
        PowerAction::GracefulRestart,
    ];

    /// The kebab-case name used on command lines and in docs (`graceful-off`).
    pub fn as_str(self) -> &'static str {
        match self {
            PowerAction::On => "on",
            PowerAction::Off => "off",
            PowerAction::GracefulOff => "graceful-off",
            PowerAction::Reset => "reset",
            PowerAction::Cycle => "cycle",
            PowerAction::GracefulRestart => "graceful-restart",
        }
    }
}

impl fmt::Display for PowerAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A location or an image the provider advertises, with a title for people.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct CatalogEntry {
    pub id: String,
    pub title: String,
}

/// What a machine provider advertises: locations (the zone's classes) and images (the
/// zone's operating systems), both sorted by id.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MachineCatalog {
    pub locations: Vec<CatalogEntry>,
    pub images: Vec<CatalogEntry>,
}

/// One cloud account's machines. Implementations are cheap to call concurrently; every
/// method reads the cloud (none caches), and credentials are resolved on each request.
pub trait MachineProvider: Send + Sync + 'static {
    /// Locations and images this account advertises (from its config; no request).
    fn catalog(&self) -> MachineCatalog;

    /// Plans with prices and availability; nothing for GPU or metal queries when the cloud
    /// has none.
    fn offers(
        &self,
        query: &OfferQuery,
    ) -> impl Future<Output = Result<Vec<MachineOffer>, MachineError>> + Send;

    /// Creates the machine, or returns the one that already carries
    /// `spec.idempotency_key` (also when a concurrent create won the race).
    fn create(
        &self,
        spec: &MachineSpec,
    ) -> impl Future<Output = Result<Machine, MachineError>> + Send;

    /// The managed machine with this key, or `None`.
    fn get(
        &self,
        key: &MachineKey,
    ) -> impl Future<Output = Result<Option<Machine>, MachineError>> + Send;

    /// Every machine this provider manages (and no other), sorted by key.
    fn list(&self) -> impl Future<Output = Result<Vec<Machine>, MachineError>> + Send;

    /// Deletes the machine; [`MachineError::NotFound`] when there is none.
    fn delete(&self, key: &MachineKey) -> impl Future<Output = Result<(), MachineError>> + Send;

    /// Runs a power action; [`MachineError::NotFound`] when there is no such machine.
    fn power(
        &self,
        key: &MachineKey,
        action: PowerAction,
    ) -> impl Future<Output = Result<(), MachineError>> + Send;

    /// Reinstalls the machine from `image`, keeping its id and addresses.
    fn reinstall(
        &self,
        key: &MachineKey,
        image: &str,
    ) -> impl Future<Output = Result<(), MachineError>> + Send;

    /// Delivers the zone's bootstrap to `machine`, which `create` just returned, when the
    /// cloud cannot take it as user data (a dedicated server installed from its rescue
    /// system, a host reached over SSH). Says which machine it is through
    /// [`ProgressSink::identified`](crate::provider::ProgressSink::identified) before the
    /// join token travels. The default does nothing: the bootstrap went in the user data.
    fn install(
        &self,
        machine: &Machine,
        install: &Install,
        progress: &crate::provider::ProgressSink,
    ) -> impl Future<Output = Result<(), MachineError>> + Send {
        let _ = (machine, install, progress);
        async { Ok(()) }
    }
}

/// Builds a hostname-safe name (lowercase letters, digits and `-`, at most 63 characters,
/// starting with a letter and not ending with `-`) from a node id: `inst_01ab` →
/// `inst-01ab`. Ids that would be cut keep a short hash of the whole id, so two long ids
/// do not share a name.
pub fn hostname_for(node_id: &str) -> String {
    let mut name: String = node_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    while name.contains("--") {
        name = name.replace("--", "-");
    }
    let mut name = name.trim_matches('-').to_string();
    if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        name.insert_str(0, "n-");
    }
    if name.len() > 63 {
        let hash = fnv1a(node_id.as_bytes());
        let suffix = format!("-{:08x}", hash as u32);
        name.truncate(63 - suffix.len());
        let trimmed = name.trim_end_matches('-').len();
        name.truncate(trimmed);
        name.push_str(&suffix);
    }
    let trimmed = name.trim_end_matches('-').len();
    name.truncate(trimmed);
    name
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostnames_are_safe_and_distinct() {
        assert_eq!(hostname_for("inst_01ABC"), "inst-01abc");
        assert_eq!(hostname_for("9lives"), "n-9lives");
        assert_eq!(hostname_for("a..b__c-"), "a-b-c");
        let long_a = format!("{}-a", "x".repeat(80));
        let long_b = format!("{}-b", "x".repeat(80));
        let (a, b) = (hostname_for(&long_a), hostname_for(&long_b));
        assert!(a.len() <= 63 && b.len() <= 63);
        assert_ne!(a, b);
        for name in [a, b, hostname_for("conformance-deploy-is-idempotent-123-1")] {
            assert!(
                name.bytes()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
            );
            assert!(!name.ends_with('-') && name.starts_with(|c: char| c.is_ascii_lowercase()));
        }
    }
}
