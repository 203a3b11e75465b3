//! The single-cloud machine model, and the one adapter that serves it to a zone.
//!
//! A standalone provider (Hetzner Cloud, Vultr, Hetzner Robot) implements
//! [`MachineProvider`]: offers, idempotent create, get, list, delete, power and reinstall
//! against one cloud account. [`MachineAdapter`] turns any such implementation into a
//! [`Provider`](crate::Provider) the runner serves:
//!
//! - quotes are answered from an offers snapshot that a background task refreshes while
//!   the replica serves, so a quote never calls a cloud; the quote's class is the location
//!   and `placement["plan"]` picks an exact plan, else the cheapest available offer whose
//!   vCPUs, memory and architecture equal the shape;
//! - deploy creates the machine with the node id as idempotency key, so a repeated or
//!   resent deploy finds the machine it already made;
//! - destroy deletes (a machine that is already gone counts as destroyed);
//! - inventory lists the machines this provider manages, or reports nothing when the list
//!   could not be read completely.
//!
//! Error words: a [`MachineError`] carries the cloud's own message for operators; the
//! adapter logs it at DEBUG only and gives the zone generic words, with the
//! refusal kind taken from the error's class ([`MachineError::refusal_kind`]).

use std::collections::BTreeSet;
use std::fmt;
use std::future::Future;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use orc_cloud::CloudError;
use orc_common::{Architecture, Currency, Money, Period};
use orc_proto::{
    Availability, Catalog, ClassAvailability, ClassId, ClassInfo, Deploy, DeployResult, Deployed,
    DestroyResult, InstanceRef, Inventory, InventoryNode, InventorySite, NodeId, NodeState, Offer,
    OsId, OsInfo, Quote, QuoteReply, QuoteToken, Refusal, RefusalKind, Role, SiteName,
};
use rust_decimal::Decimal;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::provider::{HelloInfo, ProgressSink, Provider};

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

/// How a machine operation failed, by what the caller can do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MachineError {
    /// The machine (or what the operation names) does not exist.
    #[error("{what} does not exist")]
    NotFound { what: String },
    /// The cloud asked to wait before the next request.
    #[error("rate limited; a request is allowed again in {retry_after:?}")]
    RateLimited { retry_after: Duration },
    /// The request clashes with the cloud's current state (a name taken, a machine
    /// locked by another action).
    #[error("conflict: {message}")]
    Conflict { message: String },
    /// The plan or location has no capacity now.
    #[error("no capacity: {message}")]
    Capacity { message: String },
    /// Only the operator can fix this (a bad token, a bad config, an unknown location).
    #[error("configuration: {problem}")]
    Config { problem: String },
    /// Any other failure, with the cloud's status (when an answer came), machine code and
    /// message.
    #[error("the provider answered {}{}: {message}", status_words(.status), code_words(.code))]
    Provider {
        status: Option<u16>,
        code: Option<String>,
        message: String,
    },
}

fn status_words(status: &Option<u16>) -> String {
    match status {
        Some(status) => status.to_string(),
        None => "nothing".to_string(),
    }
}

fn code_words(code: &Option<String>) -> String {
    match code {
        Some(code) => format!(" {code}"),
        None => String::new(),
    }
}

impl MachineError {
    /// The refusal kind the zone acts on: rate limits are transient, capacity is
    /// no_capacity, configuration needs the operator, everything else failed.
    pub fn refusal_kind(&self) -> RefusalKind {
        match self {
            MachineError::RateLimited { .. } => RefusalKind::Transient,
            MachineError::Capacity { .. } => RefusalKind::NoCapacity,
            MachineError::Config { .. } => RefusalKind::OperatorFix,
            MachineError::NotFound { .. } => RefusalKind::Failed,
            MachineError::Conflict { .. } => RefusalKind::Failed,
            MachineError::Provider { .. } => RefusalKind::Failed,
        }
    }

    /// True for [`MachineError::NotFound`].
    pub fn is_not_found(&self) -> bool {
        match self {
            MachineError::NotFound { .. } => true,
            MachineError::RateLimited { .. }
            | MachineError::Conflict { .. }
            | MachineError::Capacity { .. }
            | MachineError::Config { .. }
            | MachineError::Provider { .. } => false,
        }
    }

    /// Classifies a cloud client's error: 404 → NotFound, 429 → RateLimited, sold out →
    /// Capacity, 401/403 or a request the client refuses to send → Config, 409 or a
    /// `uniqueness_error`/`conflict`/`locked` code → Conflict, the rest → Provider.
    pub fn from_cloud(error: &CloudError) -> MachineError {
        match error {
            CloudError::NotFound { path, .. } => MachineError::NotFound { what: path.clone() },
            CloudError::RateLimited { retry_after, .. } => MachineError::RateLimited {
                retry_after: *retry_after,
            },
            CloudError::NoCapacity { message, .. } => MachineError::Capacity {
                message: message.clone(),
            },
            CloudError::Provider {
                status,
                code,
                message,
                ..
            } => {
                let conflict_code = matches!(
                    code.as_deref(),
                    Some("uniqueness_error" | "conflict" | "locked")
                );
                if *status == 401 || *status == 403 {
                    MachineError::Config {
                        problem: format!("the cloud refused the credentials ({status})"),
                    }
                } else if *status == 409 || conflict_code {
                    MachineError::Conflict {
                        message: message.clone(),
                    }
                } else {
                    MachineError::Provider {
                        status: Some(*status),
                        code: code.clone(),
                        message: message.clone(),
                    }
                }
            }
            CloudError::Transport { .. } => MachineError::Provider {
                status: None,
                code: None,
                message: error.to_string(),
            },
            CloudError::Decode { .. } | CloudError::Protocol { .. } => MachineError::Provider {
                status: None,
                code: None,
                message: error.to_string(),
            },
            CloudError::ActionFailed { code, message, .. } => MachineError::Provider {
                status: None,
                code: Some(code.clone()),
                message: message.clone(),
            },
            CloudError::Deadline { .. } => MachineError::Provider {
                status: None,
                code: None,
                message: error.to_string(),
            },
            CloudError::InvalidInput { .. } => MachineError::Config {
                problem: error.to_string(),
            },
        }
    }
}

impl From<CloudError> for MachineError {
    fn from(error: CloudError) -> Self {
        MachineError::from_cloud(&error)
    }
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

/// Settings of a [`MachineAdapter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdapterOptions {
    /// How often the offers snapshot is read again while serving. Default 5 minutes.
    pub refresh_interval: Duration,
    /// How soon a failed read is tried again. Default 30 s.
    pub failed_refresh_retry: Duration,
    /// How long a quote or catalog waits for the first snapshot before answering without
    /// it. Default 10 s.
    pub first_read_wait: Duration,
    /// How long an offer's quote token is honoured. Default 10 minutes.
    pub offer_ttl: Duration,
}

impl Default for AdapterOptions {
    fn default() -> Self {
        AdapterOptions {
            refresh_interval: Duration::from_secs(300),
            failed_refresh_retry: Duration::from_secs(30),
            first_read_wait: Duration::from_secs(10),
            offer_ttl: Duration::from_secs(600),
        }
    }
}

/// The offers read at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffersSnapshot {
    /// Every offer, sorted by location, then hourly price, then plan.
    pub offers: Vec<MachineOffer>,
    pub read_at: SystemTime,
}

/// Serves a [`MachineProvider`] to a zone as a [`Provider`].
///
/// A standby replica sends no request to the cloud; the offers refresh starts when the
/// replica becomes serving (or first answers a quote) and stops when the adapter is
/// dropped.
pub struct MachineAdapter<M: MachineProvider> {
    shared: Arc<Shared<M>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

const ROLE_UNSET: u8 = 0;
const ROLE_STANDBY: u8 = 1;
const ROLE_SERVING: u8 = 2;

struct Shared<M> {
    machines: M,
    hello: HelloInfo,
    options: AdapterOptions,
    catalog: MachineCatalog,
    snapshot: watch::Sender<Option<Arc<OffersSnapshot>>>,
    role: AtomicU8,
}

impl<M: MachineProvider> fmt::Debug for MachineAdapter<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MachineAdapter")
            .field("provider", &self.shared.hello.provider)
            .field("options", &self.shared.options)
            .finish_non_exhaustive()
    }
}

impl<M: MachineProvider> Drop for MachineAdapter<M> {
    fn drop(&mut self) {
        for task in lock(&self.tasks).drain(..) {
            task.abort();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<M: MachineProvider> MachineAdapter<M> {
    /// An adapter over `machines` that introduces itself with `hello`. Touches no network.
    pub fn new(machines: M, hello: HelloInfo, options: AdapterOptions) -> Self {
        let catalog = machines.catalog();
        let (snapshot, _) = watch::channel(None);
        MachineAdapter {
            shared: Arc::new(Shared {
                machines,
                hello,
                options,
                catalog,
                snapshot,
                role: AtomicU8::new(ROLE_UNSET),
            }),
            tasks: Mutex::new(Vec::new()),
        }
    }

    /// The machine provider behind the adapter.
    pub fn machines(&self) -> &M {
        &self.shared.machines
    }

    /// The current offers snapshot, when one was read.
    pub fn snapshot(&self) -> Option<Arc<OffersSnapshot>> {
        self.shared.snapshot.borrow().clone()
    }

    /// Reads the offers now and replaces the snapshot; the snapshot is kept on failure.
    pub async fn refresh(&self) -> Result<(), MachineError> {
        refresh_once(&self.shared).await
    }

    fn become_serving(&self) {
        if self.shared.role.swap(ROLE_SERVING, Ordering::SeqCst) == ROLE_SERVING {
            return;
        }
        tracing::info!(
            provider = %self.shared.hello.provider,
            "This replica serves now; it reads the cloud's offers from here on"
        );
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::error!("no async runtime to run the offers refresh on");
            return;
        };
        let shared = self.shared.clone();
        lock(&self.tasks).push(runtime.spawn(refresh_loop(shared)));
    }

    async fn current_snapshot(&self) -> Option<Arc<OffersSnapshot>> {
        let mut rx = self.shared.snapshot.subscribe();
        let waited = tokio::time::timeout(
            self.shared.options.first_read_wait,
            rx.wait_for(Option::is_some),
        )
        .await;
        match waited {
            Ok(Ok(snapshot)) => snapshot.clone(),
            Ok(Err(_)) | Err(_) => None,
        }
    }

    fn describe_catalog(&self) -> Catalog {
        let snapshot = self.shared.snapshot.borrow().clone();
        let catalog = &self.shared.catalog;
        let classes = catalog
            .locations
            .iter()
            .filter_map(|l| {
                Some(ClassInfo {
                    id: ClassId::new(l.id.as_str()).ok()?,
                    title: l.title.clone(),
                })
            })
            .collect();
        let os = catalog
            .images
            .iter()
            .filter_map(|i| {
                Some(OsInfo {
                    id: OsId::new(i.id.as_str()).ok()?,
                    title: i.title.clone(),
                })
            })
            .collect();
        let availability = Availability {
            classes: catalog
                .locations
                .iter()
                .filter_map(|l| {
                    let can_place = snapshot.as_ref().is_some_and(|s| {
                        s.offers.iter().any(|o| o.location == l.id && o.available)
                    });
                    Some(ClassAvailability {
                        class: ClassId::new(l.id.as_str()).ok()?,
                        can_place,
                    })
                })
                .collect(),
            public_ipv4_offered: 0,
        };
        Catalog {
            classes,
            os,
            availability,
            site_gateways: false,
        }
    }

    async fn answer_quote(&self, q: Quote) -> QuoteReply {
        self.become_serving();
        let node = q.node_id.as_str();
        let location = q.class.as_str();
        let refuse = |kind: RefusalKind, why: &str| {
            tracing::info!(node, class = location, reason = why, "quote refused");
            QuoteReply::Refused(Refusal::new(kind, words::quote(kind)))
        };
        let catalog = &self.shared.catalog;
        if !catalog.locations.iter().any(|l| l.id == location) {
            return refuse(RefusalKind::OperatorFix, "the class is not a location here");
        }
        if !catalog.images.iter().any(|i| i.id == q.os.as_str()) {
            return refuse(
                RefusalKind::OperatorFix,
                "the operating system is not offered",
            );
        }
        if q.pinned_site
            .as_ref()
            .is_some_and(|s| s.as_str() != location)
        {
            return refuse(
                RefusalKind::NoCapacity,
                "the node is pinned to another site",
            );
        }
        if !q.shape.disks_gib.is_empty() {
            return refuse(RefusalKind::OperatorFix, "extra disks are not deployed");
        }
        if let Some(kind) = q.placement.get("kind")
            && matches!(kind.as_str(), "gpu" | "metal")
        {
            return refuse(RefusalKind::NoCapacity, "this cloud has no GPU or metal");
        }
        let Some(snapshot) = self.current_snapshot().await else {
            return refuse(RefusalKind::Transient, "the offers are not read yet");
        };
        let chosen = match q.placement.get("plan") {
            Some(plan) => {
                let Some(offer) = snapshot
                    .offers
                    .iter()
                    .find(|o| &o.plan == plan && o.location == location)
                else {
                    return refuse(RefusalKind::OperatorFix, "the placement's plan is unknown");
                };
                let fits = offer.vcpus >= q.shape.vcpus
                    && offer.memory_mib >= u64::from(q.shape.memory_gib) * 1024
                    && offer.arch == q.shape.arch;
                if !fits {
                    return refuse(
                        RefusalKind::NoCapacity,
                        "the placement's plan is smaller than the shape",
                    );
                }
                if !offer.available {
                    return refuse(RefusalKind::NoCapacity, "the plan is sold out");
                }
                offer
            }
            None => {
                let shaped: Vec<&MachineOffer> = snapshot
                    .offers
                    .iter()
                    .filter(|o| {
                        o.location == location
                            && o.matches(q.shape.vcpus, q.shape.memory_gib, q.shape.arch)
                    })
                    .collect();
                let cheapest = shaped
                    .iter()
                    .copied()
                    .filter(|o| o.available)
                    .min_by(|a, b| (a.hourly.amount, &a.plan).cmp(&(b.hourly.amount, &b.plan)));
                match cheapest {
                    Some(offer) => offer,
                    None if shaped.is_empty() => {
                        return refuse(RefusalKind::NoCapacity, "no plan has this shape");
                    }
                    None => {
                        return refuse(
                            RefusalKind::NoCapacity,
                            "every plan of this shape is sold out",
                        );
                    }
                }
            }
        };
        let expires = SystemTime::now() + self.shared.options.offer_ttl;
        let token = OfferToken {
            node: node.to_string(),
            location: chosen.location.clone(),
            plan: chosen.plan.clone(),
            hourly: chosen.hourly,
            expires_ms: unix_millis(expires),
        };
        let (Ok(site), Ok(quote_token)) = (
            SiteName::new(chosen.location.as_str()),
            QuoteToken::new(token.encode()),
        ) else {
            return refuse(RefusalKind::Failed, "the offer has an empty location");
        };
        QuoteReply::Offer(Offer {
            site,
            price: Some(chosen.hourly),
            words: format!("{} · {}", q.shape, chosen.location),
            quote_token,
            expires,
        })
    }

    async fn carry_out_deploy(&self, d: Deploy) -> DeployResult {
        self.become_serving();
        let node = d.node_id.as_str();
        let failed = |why: &str| {
            tracing::warn!(node, reason = why, "deploy refused");
            DeployResult::Refused(Refusal::new(RefusalKind::Failed, words::COULD_NOT_CREATE))
        };
        let token = match OfferToken::decode(d.quote_token.as_str()) {
            Some(token) if token.node == node => token,
            Some(_) => return failed("the quote token belongs to another node"),
            None => return failed("the quote token cannot be read"),
        };
        let Some(key) = MachineKey::new(node) else {
            return failed("the node id is empty");
        };
        let machines = &self.shared.machines;
        let outcome = if token.expires_ms < unix_millis(SystemTime::now()) {
            match machines.get(&key).await {
                Ok(Some(machine)) => Ok(machine),
                Ok(None) => return failed("the offer lapsed before the deploy"),
                Err(e) => Err(e),
            }
        } else {
            let user_data = match user_data(&d.bootstrap.0, &d.ssh_keys) {
                Ok(data) => data,
                Err(problem) => return failed(problem),
            };
            let spec = MachineSpec {
                idempotency_key: key,
                name: hostname_for(node),
                location: token.location.clone(),
                plan: token.plan.clone(),
                image: d.os.as_str().to_string(),
                ssh_keys: d.ssh_keys.clone(),
                user_data,
            };
            tracing::info!(node, location = %spec.location, plan = %spec.plan, "creating the node's machine");
            machines.create(&spec).await
        };
        match outcome {
            Ok(machine) => deployed(&d.node_id, machine, Some(token.hourly)),
            Err(e) => {
                let kind = e.refusal_kind();
                tracing::info!(node, kind = %kind, "the node's machine could not be created");
                tracing::debug!(node, error = %e, "the cloud's answer");
                DeployResult::Refused(Refusal::new(kind, words::deploy(kind)))
            }
        }
    }

    async fn carry_out_destroy(&self, node_id: NodeId) -> DestroyResult {
        self.become_serving();
        let Some(key) = MachineKey::new(node_id.as_str()) else {
            return DestroyResult::Destroyed;
        };
        match self.shared.machines.delete(&key).await {
            Ok(()) => DestroyResult::Destroyed,
            Err(e) if e.is_not_found() => DestroyResult::Destroyed,
            Err(e) => {
                let kind = e.refusal_kind();
                tracing::info!(node = %node_id, kind = %kind, "the node's machine could not be deleted");
                tracing::debug!(node = %node_id, error = %e, "the cloud's answer");
                DestroyResult::Refused(Refusal::new(kind, words::destroy(kind)))
            }
        }
    }

    async fn report_inventory(&self) -> Option<Inventory> {
        let machines = match self.shared.machines.list().await {
            Ok(machines) => machines,
            Err(e) => {
                tracing::info!(kind = %e.refusal_kind(), "the machines could not be listed; no inventory this pass");
                tracing::debug!(error = %e, "the cloud's answer");
                return None;
            }
        };
        Some(inventory_of(&machines))
    }
}

/// The inventory report of a complete machine list: one node per machine, one site per
/// location that holds one, both sorted.
pub fn inventory_of(machines: &[Machine]) -> Inventory {
    let mut nodes = Vec::new();
    let mut sites = BTreeSet::new();
    for machine in machines {
        let (Ok(node_id), Ok(site), Ok(instance_ref)) = (
            NodeId::new(machine.key.as_str()),
            SiteName::new(machine.location.as_str()),
            InstanceRef::new(machine.instance_ref.as_str()),
        ) else {
            continue;
        };
        sites.insert(site.clone());
        nodes.push(InventoryNode {
            node_id,
            site,
            instance_ref,
            state: match machine.state {
                MachineState::Provisioning => NodeState::Provisioning,
                MachineState::Running => NodeState::Running,
                MachineState::Stopped => NodeState::Stopped,
                MachineState::Deleting => NodeState::Deleting,
            },
        });
    }
    nodes.sort_by(|a, b| a.node_id.cmp(&b.node_id));
    Inventory {
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
    }
}

fn deployed(node_id: &NodeId, machine: Machine, price: Option<Money>) -> DeployResult {
    let (Ok(site), Ok(instance_ref)) = (
        SiteName::new(machine.location.as_str()),
        InstanceRef::new(machine.instance_ref.as_str()),
    ) else {
        tracing::warn!(node = %node_id, "the cloud answered a machine without location or id");
        return DeployResult::Refused(Refusal::new(RefusalKind::Failed, words::COULD_NOT_CREATE));
    };
    DeployResult::Deployed(Deployed {
        node_id: node_id.clone(),
        site,
        addresses: machine.addresses,
        price,
        instance_ref,
    })
}

async fn refresh_once<M: MachineProvider>(shared: &Shared<M>) -> Result<(), MachineError> {
    let mut offers = shared.machines.offers(&OfferQuery::default()).await?;
    offers.sort_by(|a, b| {
        (&a.location, a.hourly.amount, &a.plan).cmp(&(&b.location, b.hourly.amount, &b.plan))
    });
    tracing::debug!(offers = offers.len(), "offers read");
    shared.snapshot.send_replace(Some(Arc::new(OffersSnapshot {
        offers,
        read_at: SystemTime::now(),
    })));
    Ok(())
}

async fn refresh_loop<M: MachineProvider>(shared: Arc<Shared<M>>) {
    loop {
        let wait = match refresh_once(&shared).await {
            Ok(()) => shared.options.refresh_interval,
            Err(e) => {
                tracing::warn!(kind = %e.refusal_kind(), "the cloud's offers could not be read; quotes use the last snapshot");
                tracing::debug!(error = %e, "the cloud's answer");
                shared
                    .options
                    .failed_refresh_retry
                    .min(shared.options.refresh_interval)
            }
        };
        tokio::time::sleep(wait).await;
    }
}

impl<M: MachineProvider> Provider for MachineAdapter<M> {
    fn hello(&self) -> HelloInfo {
        self.shared.hello.clone()
    }

    async fn catalog(&self) -> Catalog {
        if self.shared.role.load(Ordering::SeqCst) == ROLE_SERVING {
            let _ = self.current_snapshot().await;
        }
        self.describe_catalog()
    }

    async fn quote(&self, quote: Quote) -> QuoteReply {
        self.answer_quote(quote).await
    }

    async fn deploy(&self, deploy: Deploy, progress: ProgressSink) -> DeployResult {
        progress.note(words::CREATING).await;
        self.carry_out_deploy(deploy).await
    }

    async fn destroy(&self, node_id: NodeId) -> DestroyResult {
        self.carry_out_destroy(node_id).await
    }

    async fn inventory(&self) -> Option<Inventory> {
        self.report_inventory().await
    }

    fn on_role(&self, role: Role) {
        match role {
            Role::Serving => self.become_serving(),
            Role::Standby => {
                if self.shared.role.swap(ROLE_STANDBY, Ordering::SeqCst) != ROLE_STANDBY {
                    for task in lock(&self.tasks).drain(..) {
                        task.abort();
                    }
                    tracing::info!(
                        "Standing by: this replica reads no cloud account until it is handed work"
                    );
                }
            }
        }
    }
}

/// What a quote token carries: the node, the plan and location it was offered at, the
/// hourly price and when it lapses. Any replica can read it (no state behind it).
#[derive(Debug, Clone, PartialEq, Eq)]
struct OfferToken {
    node: String,
    location: String,
    plan: String,
    hourly: Money,
    expires_ms: u64,
}

const TOKEN_VERSION: &str = "m1";

impl OfferToken {
    fn encode(&self) -> String {
        format!(
            "{TOKEN_VERSION}|{}|{}|{}|{}|{}|{}",
            self.location,
            self.plan,
            self.hourly.amount,
            self.hourly.currency.as_str(),
            self.expires_ms,
            self.node
        )
    }

    fn decode(text: &str) -> Option<OfferToken> {
        let mut parts = text.splitn(7, '|');
        if parts.next()? != TOKEN_VERSION {
            return None;
        }
        let location = parts.next()?.to_string();
        let plan = parts.next()?.to_string();
        let amount: Decimal = parts.next()?.parse().ok()?;
        let currency: Currency = parts.next()?.parse().ok()?;
        let expires_ms = parts.next()?.parse().ok()?;
        let node = parts.next()?.to_string();
        Some(OfferToken {
            node,
            location,
            plan,
            hourly: Money::new(amount, currency, Period::Hour),
            expires_ms,
        })
    }
}

fn unix_millis(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The node's user data: a cloud-config installing `ssh_keys` for root, the zone's
/// bootstrap payload, or a MIME multipart document with both. `Err` names what is wrong.
pub fn user_data(bootstrap: &[u8], ssh_keys: &[String]) -> Result<Option<String>, &'static str> {
    let bootstrap = std::str::from_utf8(bootstrap).map_err(|_| "the bootstrap is not UTF-8")?;
    let mut keys: Vec<&str> = ssh_keys
        .iter()
        .map(|k| k.trim())
        .filter(|k| !k.is_empty())
        .collect();
    keys.dedup();
    let cloud_config = (!keys.is_empty()).then(|| {
        let mut text = "#cloud-config\nssh_authorized_keys:\n".to_string();
        for key in &keys {
            text.push_str(&format!("  - {}\n", quoted(key)));
        }
        text
    });
    Ok(match (bootstrap.is_empty(), cloud_config) {
        (true, None) => None,
        (true, Some(cc)) => Some(cc),
        (false, None) => Some(bootstrap.to_string()),
        (false, Some(cc)) => {
            let boundary = "==orc-machine-user-data==";
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

/// A YAML double-quoted scalar.
fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The adapter's words for tenants: generic, never naming a cloud, plan or city.
pub mod words {
    use orc_proto::RefusalKind;

    /// Progress note when a deploy starts.
    pub const CREATING: &str = "creating the machine";
    /// A deploy failed for a reason the tenant cannot act on.
    pub const COULD_NOT_CREATE: &str = "the machine could not be created";

    /// Words of a refused quote.
    pub fn quote(kind: RefusalKind) -> &'static str {
        match kind {
            RefusalKind::NoCapacity => "no machine of this kind can be placed here right now",
            RefusalKind::Counting => "the provider is still reading what it holds",
            RefusalKind::Transient => "the provider is busy; the request will be tried again",
            RefusalKind::OperatorFix => {
                "this request needs a change to the provider's configuration"
            }
            RefusalKind::Failed => "the request could not be priced",
        }
    }

    /// Words of a refused deploy.
    pub fn deploy(kind: RefusalKind) -> &'static str {
        match kind {
            RefusalKind::NoCapacity => "no machine of this kind can be placed here right now",
            RefusalKind::Counting => "the provider is still reading what it holds",
            RefusalKind::Transient => "the provider is busy; the machine will be created later",
            RefusalKind::OperatorFix => {
                "the machine needs a change to the provider's configuration"
            }
            RefusalKind::Failed => COULD_NOT_CREATE,
        }
    }

    /// Words of a refused destroy.
    pub fn destroy(kind: RefusalKind) -> &'static str {
        match kind {
            RefusalKind::NoCapacity | RefusalKind::Counting | RefusalKind::Transient => {
                "the provider is busy; the machine will be removed later"
            }
            RefusalKind::OperatorFix => {
                "removing the machine needs a change to the provider's configuration"
            }
            RefusalKind::Failed => "the machine could not be removed",
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::atomic::AtomicUsize;

    use orc_common::Shape;
    use orc_proto::{Bootstrap, PoolId, ProviderName, Purpose, Replica, ResourceUri};
    use rust_decimal::Decimal;

    use super::*;

    /// Machines in memory: offers as given, creates keyed, one injected failure.
    #[derive(Default)]
    struct Memory {
        offers: Mutex<Vec<MachineOffer>>,
        machines: Mutex<BTreeMap<MachineKey, Machine>>,
        fail_next: Mutex<Option<MachineError>>,
        offer_reads: AtomicUsize,
        creates: AtomicUsize,
    }

    impl Memory {
        fn failure(&self) -> Result<(), MachineError> {
            match lock(&self.fail_next).take() {
                Some(e) => Err(e),
                None => Ok(()),
            }
        }
    }

    impl MachineProvider for Arc<Memory> {
        fn catalog(&self) -> MachineCatalog {
            MachineCatalog {
                locations: vec![
                    CatalogEntry {
                        id: "here".into(),
                        title: "Here".into(),
                    },
                    CatalogEntry {
                        id: "there".into(),
                        title: "There".into(),
                    },
                ],
                images: vec![CatalogEntry {
                    id: "linux".into(),
                    title: "Linux".into(),
                }],
            }
        }

        async fn offers(&self, _query: &OfferQuery) -> Result<Vec<MachineOffer>, MachineError> {
            self.offer_reads.fetch_add(1, Ordering::SeqCst);
            self.failure()?;
            Ok(lock(&self.offers).clone())
        }

        async fn create(&self, spec: &MachineSpec) -> Result<Machine, MachineError> {
            self.failure()?;
            let mut machines = lock(&self.machines);
            let n = machines.len();
            self.creates.fetch_add(1, Ordering::SeqCst);
            Ok(machines
                .entry(spec.idempotency_key.clone())
                .or_insert_with(|| Machine {
                    key: spec.idempotency_key.clone(),
                    instance_ref: format!("m-{n}"),
                    name: spec.name.clone(),
                    location: spec.location.clone(),
                    plan: spec.plan.clone(),
                    state: MachineState::Running,
                    addresses: vec!["192.0.2.10".parse().unwrap()],
                })
                .clone())
        }

        async fn get(&self, key: &MachineKey) -> Result<Option<Machine>, MachineError> {
            self.failure()?;
            Ok(lock(&self.machines).get(key).cloned())
        }

        async fn list(&self) -> Result<Vec<Machine>, MachineError> {
            self.failure()?;
            Ok(lock(&self.machines).values().cloned().collect())
        }

        async fn delete(&self, key: &MachineKey) -> Result<(), MachineError> {
            self.failure()?;
            match lock(&self.machines).remove(key) {
                Some(_) => Ok(()),
                None => Err(MachineError::NotFound {
                    what: key.to_string(),
                }),
            }
        }

        async fn power(&self, key: &MachineKey, _action: PowerAction) -> Result<(), MachineError> {
            self.get(key)
                .await?
                .map(|_| ())
                .ok_or(MachineError::NotFound {
                    what: key.to_string(),
                })
        }

        async fn reinstall(&self, key: &MachineKey, _image: &str) -> Result<(), MachineError> {
            self.power(key, PowerAction::Reset).await
        }
    }

    fn offer(plan: &str, location: &str, vcpus: u32, gib: u32, hourly: &str) -> MachineOffer {
        MachineOffer {
            plan: plan.into(),
            location: location.into(),
            vcpus,
            memory_mib: u64::from(gib) * 1024,
            arch: Architecture::X86_64,
            disk_gb: 40,
            hourly: Money::new(hourly.parse().unwrap(), Currency::EUR, Period::Hour),
            monthly: None,
            available: true,
        }
    }

    fn memory() -> Arc<Memory> {
        let memory = Arc::new(Memory::default());
        *lock(&memory.offers) = vec![
            offer("big", "here", 4, 8, "0.02"),
            offer("small-a", "here", 2, 4, "0.009"),
            offer("small-b", "here", 2, 4, "0.007"),
            offer("small-c", "there", 2, 4, "0.001"),
        ];
        memory
    }

    fn adapter(memory: &Arc<Memory>) -> MachineAdapter<Arc<Memory>> {
        MachineAdapter::new(
            memory.clone(),
            HelloInfo {
                provider: ProviderName::new("memory").unwrap(),
                resource_uri: ResourceUri::new("urn:orc:provider:memory").unwrap(),
                replica: Replica {
                    host: "h".into(),
                    pid: 1,
                    slot: 0,
                },
                version: "0".into(),
            },
            AdapterOptions {
                first_read_wait: Duration::from_secs(5),
                ..AdapterOptions::default()
            },
        )
    }

    fn quote(node: &str, class: &str, vcpus: u32, gib: u32) -> Quote {
        Quote {
            pool: PoolId::new("p").unwrap(),
            node_id: NodeId::new(node).unwrap(),
            purpose: Purpose::Tenant,
            shape: Shape {
                vcpus,
                memory_gib: gib,
                arch: Architecture::X86_64,
                disks_gib: vec![],
            },
            class: ClassId::new(class).unwrap(),
            os: OsId::new("linux").unwrap(),
            pinned_site: None,
            public: false,
            placement: BTreeMap::new(),
        }
    }

    fn refused(reply: QuoteReply) -> RefusalKind {
        match reply {
            QuoteReply::Refused(r) => r.kind,
            QuoteReply::Offer(o) => panic!("expected a refusal, got an offer at {}", o.site),
        }
    }

    fn offered(reply: QuoteReply) -> Offer {
        match reply {
            QuoteReply::Offer(o) => o,
            QuoteReply::Refused(r) => panic!("expected an offer, got {r}"),
        }
    }

    fn deploy_of(node: &str, offer: &Offer) -> Deploy {
        Deploy {
            node_id: NodeId::new(node).unwrap(),
            quote_token: offer.quote_token.clone(),
            os: OsId::new("linux").unwrap(),
            ssh_keys: vec![],
            bootstrap: Bootstrap::default(),
        }
    }

    #[tokio::test]
    async fn quotes_pick_the_cheapest_available_offer_of_the_exact_shape() {
        let memory = memory();
        let adapter = adapter(&memory);
        let offer = offered(adapter.quote(quote("n1", "here", 2, 4)).await);
        assert_eq!(offer.site.as_str(), "here");
        assert_eq!(offer.price.unwrap().amount, Decimal::new(7, 3));
        let token = OfferToken::decode(offer.quote_token.as_str()).unwrap();
        assert_eq!(token.plan, "small-b");

        lock(&memory.offers)[2].available = false;
        adapter.refresh().await.unwrap();
        let token = offered(adapter.quote(quote("n1", "here", 2, 4)).await).quote_token;
        assert_eq!(OfferToken::decode(token.as_str()).unwrap().plan, "small-a");

        for o in lock(&memory.offers).iter_mut() {
            o.available = false;
        }
        adapter.refresh().await.unwrap();
        assert_eq!(
            refused(adapter.quote(quote("n1", "here", 2, 4)).await),
            RefusalKind::NoCapacity
        );
        assert_eq!(
            refused(adapter.quote(quote("n1", "here", 3, 4)).await),
            RefusalKind::NoCapacity
        );
    }

    #[tokio::test]
    async fn quotes_honour_placement_and_refuse_by_kind() {
        let memory = memory();
        let adapter = adapter(&memory);
        let mut placed = quote("n1", "here", 2, 4);
        placed.placement.insert("plan".into(), "small-a".into());
        let token = offered(adapter.quote(placed.clone()).await).quote_token;
        assert_eq!(OfferToken::decode(token.as_str()).unwrap().plan, "small-a");

        let mut too_small = quote("n1", "here", 4, 8);
        too_small.placement.insert("plan".into(), "small-a".into());
        assert_eq!(
            refused(adapter.quote(too_small).await),
            RefusalKind::NoCapacity
        );
        let mut roomy = quote("n1", "here", 1, 2);
        roomy.placement.insert("plan".into(), "big".into());
        offered(adapter.quote(roomy).await);

        placed.placement.insert("plan".into(), "nonesuch".into());
        assert_eq!(
            refused(adapter.quote(placed).await),
            RefusalKind::OperatorFix
        );

        let mut gpu = quote("n1", "here", 2, 4);
        gpu.placement.insert("kind".into(), "gpu".into());
        assert_eq!(refused(adapter.quote(gpu).await), RefusalKind::NoCapacity);

        let mut disks = quote("n1", "here", 2, 4);
        disks.shape.disks_gib = vec![100];
        assert_eq!(
            refused(adapter.quote(disks).await),
            RefusalKind::OperatorFix
        );

        let mut pinned = quote("n1", "here", 2, 4);
        pinned.pinned_site = Some(SiteName::new("there").unwrap());
        assert_eq!(
            refused(adapter.quote(pinned).await),
            RefusalKind::NoCapacity
        );

        let mut os = quote("n1", "here", 2, 4);
        os.os = OsId::new("plan9").unwrap();
        assert_eq!(refused(adapter.quote(os).await), RefusalKind::OperatorFix);

        assert_eq!(
            refused(adapter.quote(quote("n1", "elsewhere", 2, 4)).await),
            RefusalKind::OperatorFix
        );
    }

    #[tokio::test]
    async fn a_standby_replica_reads_nothing_and_a_failed_first_read_is_transient() {
        let memory = memory();
        let adapter = adapter(&memory);
        adapter.on_role(Role::Standby);
        let catalog = adapter.catalog().await;
        assert_eq!(catalog.classes.len(), 2);
        assert!(catalog.availability.classes.iter().all(|c| !c.can_place));
        assert!(!catalog.site_gateways);
        assert_eq!(memory.offer_reads.load(Ordering::SeqCst), 0);

        let failing = self::memory();
        *lock(&failing.fail_next) = Some(MachineError::RateLimited {
            retry_after: Duration::from_secs(1),
        });
        let quick = MachineAdapter::new(
            failing.clone(),
            adapter.hello(),
            AdapterOptions {
                first_read_wait: Duration::from_millis(200),
                failed_refresh_retry: Duration::from_secs(600),
                ..AdapterOptions::default()
            },
        );
        assert_eq!(
            refused(quick.quote(quote("n1", "here", 2, 4)).await),
            RefusalKind::Transient
        );
        assert_eq!(failing.offer_reads.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn deploy_destroy_and_inventory_map_machine_errors_to_refusals() {
        let memory = memory();
        let adapter = adapter(&memory);
        let offer = offered(adapter.quote(quote("n1", "here", 2, 4)).await);
        let progress = || ProgressSink::discard(NodeId::new("n1").unwrap());

        *lock(&memory.fail_next) = Some(MachineError::RateLimited {
            retry_after: Duration::from_secs(3),
        });
        match adapter.deploy(deploy_of("n1", &offer), progress()).await {
            DeployResult::Refused(r) => assert_eq!(r.kind, RefusalKind::Transient),
            DeployResult::Deployed(d) => panic!("deployed through a rate limit: {d:?}"),
        }
        *lock(&memory.fail_next) = Some(MachineError::Config {
            problem: "token".into(),
        });
        match adapter.deploy(deploy_of("n1", &offer), progress()).await {
            DeployResult::Refused(r) => {
                assert_eq!(r.kind, RefusalKind::OperatorFix);
                assert!(!r.words.contains("token"));
            }
            DeployResult::Deployed(d) => panic!("deployed with a bad config: {d:?}"),
        }

        let first = match adapter.deploy(deploy_of("n1", &offer), progress()).await {
            DeployResult::Deployed(d) => d,
            DeployResult::Refused(r) => panic!("refused: {r}"),
        };
        assert_eq!(first.site.as_str(), "here");
        assert_eq!(first.price, offer.price);
        let again = match adapter.deploy(deploy_of("n1", &offer), progress()).await {
            DeployResult::Deployed(d) => d,
            DeployResult::Refused(r) => panic!("refused: {r}"),
        };
        assert_eq!(again.instance_ref, first.instance_ref);

        match adapter.deploy(deploy_of("n2", &offer), progress()).await {
            DeployResult::Refused(r) => assert_eq!(r.kind, RefusalKind::Failed),
            DeployResult::Deployed(d) => panic!("another node's token deployed {d:?}"),
        }

        let inventory = adapter.inventory().await.unwrap();
        assert_eq!(inventory.nodes.len(), 1);
        assert_eq!(inventory.sites.len(), 1);
        *lock(&memory.fail_next) = Some(MachineError::Provider {
            status: Some(500),
            code: None,
            message: "boom".into(),
        });
        assert_eq!(adapter.inventory().await, None);

        let n1 = NodeId::new("n1").unwrap();
        assert_eq!(adapter.destroy(n1.clone()).await, DestroyResult::Destroyed);
        assert_eq!(adapter.destroy(n1).await, DestroyResult::Destroyed);
        assert_eq!(memory.creates.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn an_expired_offer_deploys_only_a_machine_that_exists() {
        let memory = memory();
        let adapter = adapter(&memory);
        let offer = offered(adapter.quote(quote("n1", "here", 2, 4)).await);
        let mut token = OfferToken::decode(offer.quote_token.as_str()).unwrap();
        token.expires_ms = 1;
        let expired = Offer {
            quote_token: QuoteToken::new(token.encode()).unwrap(),
            ..offer
        };
        let progress = ProgressSink::discard(NodeId::new("n1").unwrap());
        match adapter
            .deploy(deploy_of("n1", &expired), progress.clone())
            .await
        {
            DeployResult::Refused(r) => assert_eq!(r.kind, RefusalKind::Failed),
            DeployResult::Deployed(d) => panic!("an expired offer created {d:?}"),
        }
        assert_eq!(memory.creates.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn cloud_errors_map_to_machine_errors() {
        let provider = |status: u16, code: Option<&str>| CloudError::Provider {
            operation: "op",
            status,
            code: code.map(str::to_string),
            message: "words".into(),
        };
        let cases: Vec<(CloudError, RefusalKind)> = vec![
            (
                CloudError::NotFound {
                    operation: "op",
                    path: "/x".into(),
                },
                RefusalKind::Failed,
            ),
            (
                CloudError::RateLimited {
                    operation: "op",
                    retry_after: Duration::from_secs(2),
                },
                RefusalKind::Transient,
            ),
            (
                CloudError::NoCapacity {
                    operation: "op",
                    message: "sold out".into(),
                },
                RefusalKind::NoCapacity,
            ),
            (
                provider(401, Some("unauthorized")),
                RefusalKind::OperatorFix,
            ),
            (
                provider(403, Some("resource_limit_exceeded")),
                RefusalKind::OperatorFix,
            ),
            (provider(409, Some("uniqueness_error")), RefusalKind::Failed),
            (provider(500, None), RefusalKind::Failed),
            (
                CloudError::InvalidInput {
                    what: "user_data",
                    problem: "too large".into(),
                },
                RefusalKind::OperatorFix,
            ),
        ];
        for (cloud, kind) in cases {
            assert_eq!(
                MachineError::from_cloud(&cloud).refusal_kind(),
                kind,
                "{cloud}"
            );
        }
        assert!(
            MachineError::from_cloud(&provider(404, None)).refusal_kind() == RefusalKind::Failed
        );
        assert!(matches!(
            MachineError::from_cloud(&provider(409, Some("uniqueness_error"))),
            MachineError::Conflict { .. }
        ));
        assert_eq!(
            MachineError::from_cloud(&provider(422, Some("invalid_input"))),
            MachineError::Provider {
                status: Some(422),
                code: Some("invalid_input".into()),
                message: "words".into()
            }
        );
        let decode = CloudError::Protocol {
            operation: "op",
            problem: "next_page does not advance".into(),
        };
        assert!(matches!(
            MachineError::from_cloud(&decode),
            MachineError::Provider { status: None, .. }
        ));
        assert!(
            MachineError::from_cloud(&CloudError::NotFound {
                operation: "op",
                path: "/x".into()
            })
            .is_not_found()
        );
    }

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

    #[test]
    fn offer_tokens_round_trip_and_reject_garbage() {
        let token = OfferToken {
            node: "node|with|bars".into(),
            location: "fsn1".into(),
            plan: "cx23".into(),
            hourly: Money::new(Decimal::new(595, 5), Currency::EUR, Period::Hour),
            expires_ms: 1_800_000_000_000,
        };
        assert_eq!(OfferToken::decode(&token.encode()), Some(token));
        assert_eq!(OfferToken::decode("m1|fsn1"), None);
        assert_eq!(OfferToken::decode("m2|a|b|1|EUR|1|n"), None);
        assert_eq!(OfferToken::decode("m1|a|b|x|EUR|1|n"), None);
    }

    #[test]
    fn user_data_carries_keys_and_bootstrap() {
        assert_eq!(user_data(b"", &[]).unwrap(), None);
        let keys = vec!["ssh-ed25519 AAAA a@b".to_string(), " ".to_string()];
        let only_keys = user_data(b"", &keys).unwrap().unwrap();
        assert!(only_keys.starts_with("#cloud-config\n"));
        assert!(only_keys.contains("\"ssh-ed25519 AAAA a@b\""));
        assert_eq!(
            user_data(b"#!/bin/sh\n", &[]).unwrap().as_deref(),
            Some("#!/bin/sh\n")
        );
        let both = user_data(b"#!/bin/sh\necho hi\n", &keys).unwrap().unwrap();
        assert!(both.contains("multipart/mixed"));
        assert!(both.contains("text/x-shellscript") && both.contains("echo hi"));
        assert!(user_data(&[0xff, 0xfe], &[]).is_err());
    }
}
