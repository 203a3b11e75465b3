//! The built-in `core` provider: apps run as supervised child processes on the zone host.
//!
//! A pool on provider `core` names an app package and params. Each of its nodes is one
//! *slot*: one process of the app's binary, started when the node is deployed and stopped
//! when it is destroyed ([`Apps::quote_slot`], [`Apps::deploy_slot`], [`Apps::destroy_slot`];
//! the controller routes provider [`CORE_PROVIDER`] here through its `NodeBackend`). The
//! supervisor keeps slots running (restart with capped exponential backoff, see [`policy`]),
//! keeps each slot's output as log lines with levels ([`logs`], read with [`Apps::logs`]),
//! and replaces a pool's slots one at a time when its generation changes (a reconfigure).
//!
//! Invariants:
//! - at most one slot task per node id, so a deploy is idempotent and a destroy of an absent
//!   node succeeds;
//! - a slot task exists only while its node is live in the store: every
//!   [`AppsOptions::poll_interval`] the supervisor starts slots for `running` nodes that have
//!   none (after a zone restart) and stops slots whose node has ended or vanished;
//! - sensitive params and the zone token given to an app reach it only as files of mode 0600
//!   in its runtime dir; they never appear in its environment, a log line, a `Debug` or an
//!   error.
//!
//! Offers of `core` are at site `local` and carry no price: an app slot costs the zone
//! nothing it could mark up, so `core` nodes are unpriced whatever the provider's strategy.
//! See `docs/zone/apps.md`.
//!
//! Depends on the model, the store and the protocol's values only; it must never import the
//! controller (hub, reconcilers, HTTP API), which drives it and reads its logs. Callers use
//! [`Apps`] and the [`config`] an operator sets; slots and their processes stay private to
//! the supervisor, so nothing outside it can start or signal an app.

pub mod blobs;
pub mod config;
pub mod logs;
pub mod params;
pub mod policy;
mod run_as;
mod slot;

use std::collections::{BTreeMap, BTreeSet};
use std::fs::DirBuilder;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::watch;
use tokio::task::JoinSet;

use orc_zone_model::endpoints::EndpointDirectory;
use orc_zone_model::registry::{Digest, Platform};
use orc_zone_model::{
    CORE_LOCAL_SITE, ModelError, Name, NewProvider, Node, NodeId, NodeState, Pool, PoolId,
    PricingStrategy, Provider, ProviderScope, Timestamp, TokenSecret, UserId, sys_org_id,
    sys_project_id,
};
use orc_zone_store::{Kind, Store, StoreError};

pub use blobs::{BlobError, Blobs, InstallFor};
pub use config::{AppBinary, AppsConfig, AppsOptions, ResolveError};
pub use logs::{Level, LogLine, LogSource};
pub use params::ParamError;
pub use run_as::{DEFAULT_RUNTIME_ROOT, DYNAMIC_IDS, RunAs};
pub use slot::{INHERITED_ENV, SlotStatus, SpawnError};

use params::{FileText, ParamFile, plan_params};
use policy::{Registered, RolloutStep, SlotView, next_rollout_step};
use slot::{Launch, SlotContext, SlotHandle};

/// Name of the built-in provider whose pools run apps on the zone host.
pub const CORE_PROVIDER: &str = orc_zone_model::CORE_PROVIDER_NAME;
/// Resource URI of the `core` provider row.
pub const CORE_RESOURCE_URI: &str = "urn:orc:core";
/// The user whose tokens apps get to dial the zone.
pub const APPS_USER: &str = "sys-apps";
/// How long a `core` offer is honoured.
const OFFER_VALIDITY: Duration = Duration::from_secs(300);

/// Why the `core` provider could not start.
#[derive(Debug, thiserror::Error)]
pub enum AppsError {
    /// The store refused a read or write the start needs.
    #[error("core provider: {what}")]
    Store {
        what: &'static str,
        #[source]
        source: StoreError,
    },
    /// The registry's blob dir cannot be created.
    #[error("core provider: {0}")]
    Blobs(#[from] BlobError),
    /// The apps directory under the data dir cannot be created.
    #[error("core provider: cannot create the apps directory {path}")]
    Dir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Why a slot of a pool cannot be launched.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The pool names no app.
    #[error("pool {pool} names no app to run")]
    NoApp { pool: PoolId },
    /// Only pools of org `sys` may run apps for now.
    #[error("pool {pool} is not in org sys; only org sys can run apps on this zone yet")]
    NotSysOrg { pool: PoolId },
    /// The package cannot be resolved to a binary.
    #[error("pool {pool}: {source}")]
    Resolve {
        pool: PoolId,
        #[source]
        source: ResolveError,
    },
    /// Some params cannot be handed to the app (each error names its param).
    #[error("pool {pool}: {}", join_errors(.errors))]
    Params {
        pool: PoolId,
        errors: Vec<ParamError>,
    },
    /// The node is not one of a `core` pool.
    #[error("node {node} is not a node of a pool on provider core")]
    NotCore { node: NodeId },
    /// The store could not be read.
    #[error("reading the store for {what}")]
    Store {
        what: String,
        #[source]
        source: StoreError,
    },
    /// The process could not be started.
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    /// The zone is stopping its apps.
    #[error("the zone is stopping its apps")]
    ShuttingDown,
    /// No loopback port was free for one of the pool's http endpoints.
    #[error("pool {pool}: no loopback port for http endpoint {endpoint}")]
    NoPort {
        pool: PoolId,
        endpoint: String,
        #[source]
        source: std::io::Error,
    },
}

fn join_errors(errors: &[ParamError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl LaunchError {
    /// The refusal kind the zone acts on for this error.
    pub fn refusal_kind(&self) -> orc_proto::RefusalKind {
        use orc_proto::RefusalKind as K;
        match self {
            LaunchError::NoApp { .. }
            | LaunchError::NotSysOrg { .. }
            | LaunchError::Resolve { .. }
            | LaunchError::Params { .. } => K::OperatorFix,
            LaunchError::NotCore { .. } | LaunchError::Spawn(_) => K::Failed,
            LaunchError::ShuttingDown | LaunchError::NoPort { .. } => K::Transient,
            LaunchError::Store { source, .. } => {
                if source.is_retryable() {
                    K::Transient
                } else {
                    K::Failed
                }
            }
        }
    }

    /// The error with its causes, one sentence (no secret is ever part of it).
    pub fn words(&self) -> String {
        let mut words = self.to_string();
        let mut source = std::error::Error::source(self);
        while let Some(cause) = source {
            words.push_str(": ");
            words.push_str(&cause.to_string());
            source = cause.source();
        }
        words
    }
}

/// What [`Apps::slots`] shows of one slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotInfo {
    pub node_id: NodeId,
    pub pool_id: PoolId,
    pub slot: u32,
    pub generation: u64,
    pub pid: Option<u32>,
    /// How long the current process has been up; `None` while none runs.
    pub up_for: Option<Duration>,
    pub restarts: u32,
    pub exits_in_a_row: u32,
    pub backoff: Option<Duration>,
    pub last_exit: Option<String>,
}

impl SlotInfo {
    fn from_status(status: SlotStatus) -> SlotInfo {
        SlotInfo {
            node_id: status.node_id,
            pool_id: status.pool_id,
            slot: status.slot,
            generation: status.generation,
            pid: status.pid,
            up_for: status.up_since.map(|t| t.elapsed()),
            restarts: status.restarts,
            exits_in_a_row: status.exits_in_a_row,
            backoff: status.backoff,
            last_exit: status.last_exit,
        }
    }
}

/// The `core` provider. Cheap to clone; [`Apps::shutdown`] stops every slot.
#[derive(Clone)]
pub struct Apps {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Apps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Apps")
            .field("dir", &self.inner.dir)
            .field("core_provider", &self.inner.core.id)
            .finish_non_exhaustive()
    }
}

/// Which app processes are attached to the zone as provider replicas: the zone's hub
/// answers, so the supervisor can wait for a new replica to take its role before it replaces
/// the next slot of a rolling replacement.
pub trait Registrations: Send + Sync + 'static {
    /// The processes attached with pool `pool`'s service credential: `(pid, serving)`.
    fn attached(&self, pool: &PoolId) -> Vec<(u32, bool)>;
}

/// Where app slots dial the zone: the provider endpoint's URL and, when it speaks TLS, the
/// zone's CA certificate (handed to each slot as `ORC_ZONE_CA_FILE`).
#[derive(Debug, Clone)]
pub struct ZoneEndpoint {
    /// `https://ADDR` (or `http://ADDR` when the zone is plain).
    pub url: String,
    /// The CA certificate in PEM form; `None` when plain.
    pub ca_pem: Option<String>,
}

struct Inner {
    store: Store,
    config: AppsConfig,
    /// The registry's binaries.
    blobs: Blobs,
    /// `<data_dir>/apps`.
    dir: PathBuf,
    zone: ZoneEndpoint,
    core: Provider,
    apps_user: UserId,
    slots: tokio::sync::Mutex<BTreeMap<NodeId, SlotHandle>>,
    logs: Mutex<BTreeMap<(PoolId, u32), Arc<logs::SlotLog>>>,
    /// One zone token per pool, made once per zone process.
    tokens: tokio::sync::Mutex<BTreeMap<PoolId, TokenSecret>>,
    /// The loopback port of each http endpoint of each slot, kept while the slot lives, so
    /// a restarted process listens where the edge already sends its requests.
    http_ports: Mutex<BTreeMap<(PoolId, u32, NodeId, String), u16>>,
    /// Who answers which slots are attached as provider replicas.
    registrations: Mutex<Option<Arc<dyn Registrations>>>,
    /// Pools a slot of which has been attached since this process started: their rollouts
    /// wait for registration, not for the settle time.
    registering: Mutex<BTreeSet<PoolId>>,
    /// Nodes whose adoption failed, so the failure is logged once.
    adopt_failed: Mutex<BTreeSet<NodeId>>,
    shutdown: watch::Sender<bool>,
    supervisor: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Apps {
    /// Starts the `core` provider: makes sure its provider row (`core` in project `sys/sys`,
    /// scope zone) and the apps user exist, creates `<data_dir>/apps`, and starts the
    /// supervisor, which adopts every `running` node of a `core` pool (so a zone restart
    /// brings its apps back). Apps dial the zone's provider endpoint as
    /// `zone` says.
    pub async fn start(
        store: Store,
        data_dir: &Path,
        zone: ZoneEndpoint,
        config: AppsConfig,
    ) -> Result<Apps, AppsError> {
        let dir = data_dir.join("apps");
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|source| AppsError::Dir {
                path: dir.clone(),
                source,
            })?;
        let blobs = Blobs::open(data_dir)?;
        let core = ensure_core_provider(&store).await?;
        let apps_user = ensure_apps_user(&store).await?;
        retire_shared_powers(&store, &apps_user).await?;
        let (shutdown, _) = watch::channel(false);
        let apps = Apps {
            inner: Arc::new(Inner {
                store,
                config,
                blobs,
                dir,
                zone,
                core,
                apps_user,
                slots: tokio::sync::Mutex::new(BTreeMap::new()),
                logs: Mutex::new(BTreeMap::new()),
                tokens: tokio::sync::Mutex::new(BTreeMap::new()),
                http_ports: Mutex::new(BTreeMap::new()),
                registrations: Mutex::new(None),
                registering: Mutex::new(BTreeSet::new()),
                adopt_failed: Mutex::new(BTreeSet::new()),
                shutdown,
                supervisor: Mutex::new(None),
            }),
        };
        let task = tokio::spawn(supervise_loop(apps.clone()));
        if let Ok(mut slot) = apps.inner.supervisor.lock() {
            *slot = Some(task);
        }
        Ok(apps)
    }

    /// Rolling replacements of pools whose slots attach as provider replicas wait, from now
    /// on, for each new replica to be attached (as `registrations` says) before the next
    /// slot is replaced.
    pub fn watch_registrations(&self, registrations: Arc<dyn Registrations>) {
        *self
            .inner
            .registrations
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(registrations);
    }

    /// How each process of `pool` is attached, by pid; `None` when the pool's slots do not
    /// register (none has been attached since this process started).
    fn attached(&self, pool: &PoolId) -> Option<BTreeMap<u32, bool>> {
        let registrations = self
            .inner
            .registrations
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()?;
        let attached: BTreeMap<u32, bool> = registrations.attached(pool).into_iter().collect();
        let mut registering = self
            .inner
            .registering
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !attached.is_empty() {
            registering.insert(pool.clone());
        }
        registering.contains(pool).then_some(attached)
    }

    /// The registry's binaries, which slots of registry apps run.
    pub fn blobs(&self) -> &Blobs {
        &self.inner.blobs
    }

    /// The `core` provider row.
    pub fn provider(&self) -> &Provider {
        &self.inner.core
    }

    /// Stops the supervisor and every slot (SIGTERM, SIGKILL after the grace period), and
    /// waits for them. Nodes stay `running` in the store; the next start adopts them.
    pub async fn shutdown(&self) {
        self.inner.shutdown.send_replace(true);
        let task = self.inner.supervisor.lock().ok().and_then(|mut t| t.take());
        if let Some(task) = task {
            let _ = task.await;
        }
        let handles = std::mem::take(&mut *self.inner.slots.lock().await);
        let mut stopping = JoinSet::new();
        for handle in handles.into_values() {
            stopping.spawn(handle.stop());
        }
        while stopping.join_next().await.is_some() {}
    }

    /// Log lines of a pool's slots (one slot, or all), at or above `min_level`, oldest
    /// first. Lines survive restarts and replacements of a slot; each slot keeps its last
    /// [`AppsOptions::log_lines`] in memory (the file under the data dir keeps more).
    pub fn logs(&self, pool: &PoolId, slot: Option<u32>, min_level: Level) -> Vec<LogLine> {
        let sources: Vec<Arc<logs::SlotLog>> = match self.inner.logs.lock() {
            Ok(map) => map
                .iter()
                .filter(|((p, s), _)| p == pool && slot.is_none_or(|want| want == *s))
                .map(|(_, log)| log.clone())
                .collect(),
            Err(_) => Vec::new(),
        };
        let mut lines: Vec<LogLine> = sources
            .iter()
            .flat_map(|log| log.lines(min_level))
            .collect();
        lines.sort_by_key(|l| l.seq);
        lines
    }

    /// The path of a slot's log file.
    pub fn log_file(&self, pool: &PoolId, slot: u32) -> PathBuf {
        self.inner
            .dir
            .join(pool.as_str())
            .join(format!("slot-{slot}.log"))
    }

    /// Every slot the supervisor holds, by pool then slot.
    pub async fn slots(&self) -> Vec<SlotInfo> {
        let slots = self.inner.slots.lock().await;
        let mut infos: Vec<SlotInfo> = slots
            .values()
            .filter_map(SlotHandle::snapshot)
            .map(SlotInfo::from_status)
            .collect();
        infos.sort_by(|a, b| (&a.pool_id, a.slot).cmp(&(&b.pool_id, b.slot)));
        infos
    }

    /// Where each slot of `pool` serves each of its http endpoints: `(slot, endpoint,
    /// address)`, by slot then endpoint. The address is a loopback port the zone chose when
    /// the slot first started and handed to it as `ORC_HTTP_<ENDPOINT>_ADDR`; it stays the
    /// slot's while the slot lives, across restarts and reconfigures.
    pub fn http_endpoints(&self, pool: &PoolId) -> Vec<(u32, String, SocketAddr)> {
        let ports = self
            .inner
            .http_ports
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        ports
            .iter()
            .filter(|((p, _, _, _), _)| p == pool)
            .map(|((_, slot, _, name), port)| {
                (
                    *slot,
                    name.clone(),
                    SocketAddr::from((Ipv4Addr::LOCALHOST, *port)),
                )
            })
            .collect()
    }

    /// The loopback port of `endpoint` of `node` (slot `slot` of `pool`): the one it has,
    /// else a free one.
    fn http_port(
        &self,
        pool: &PoolId,
        slot: u32,
        node: &NodeId,
        endpoint: &str,
    ) -> Result<u16, LaunchError> {
        let mut ports = self
            .inner
            .http_ports
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = (pool.clone(), slot, node.clone(), endpoint.to_string());
        if let Some(port) = ports.get(&key) {
            return Ok(*port);
        }
        // A port no other slot holds: the kernel's choice, checked against the ones given.
        for _ in 0..16 {
            let port = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                .and_then(|l| l.local_addr())
                .map_err(|source| LaunchError::NoPort {
                    pool: pool.clone(),
                    endpoint: endpoint.to_string(),
                    source,
                })?
                .port();
            if !ports.values().any(|p| *p == port) {
                ports.insert(key, port);
                return Ok(port);
            }
        }
        Err(LaunchError::NoPort {
            pool: pool.clone(),
            endpoint: endpoint.to_string(),
            source: std::io::Error::other("every port the kernel offered is another slot's"),
        })
    }

    /// Forgets the ports of `node` (its slot stopped for good).
    fn release_http_ports(&self, node: &NodeId) {
        self.inner
            .http_ports
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|(_, _, n, _), _| n != node);
    }

    /// Answers a quote for a node of a `core` pool: an unpriced offer at site `local`, or an
    /// `operator_fix` refusal naming what is wrong with the pool's app (never a value).
    pub async fn quote_slot(&self, quote: &orc_proto::Quote) -> orc_proto::QuoteReply {
        let checked = async {
            let node_id = parse_node(&quote.node_id)?;
            let (pool, node) = self.core_node(&node_id).await?;
            self.launch_for(&pool, &node, false).await.map(|_| pool)
        };
        match checked.await {
            Ok(pool) => {
                let package = pool.spec.app.as_ref().map_or("app", |a| a.package.as_str());
                match orc_proto::QuoteToken::new(quote.node_id.as_str()) {
                    Ok(token) => orc_proto::QuoteReply::Offer(orc_proto::Offer {
                        site: site(),
                        price: None,
                        words: format!("{package} · {CORE_LOCAL_SITE}"),
                        quote_token: token,
                        expires: SystemTime::now() + OFFER_VALIDITY,
                    }),
                    Err(_) => refusal_reply(orc_proto::RefusalKind::Failed, "empty node id"),
                }
            }
            Err(error) => refusal_reply(error.refusal_kind(), &error.words()),
        }
    }

    /// Whether the supervisor is stopping its apps: no slot starts any more.
    pub fn is_shutting_down(&self) -> bool {
        *self.inner.shutdown.borrow()
    }

    /// Starts the node's slot, or returns it if it already runs (idempotent by node id).
    pub async fn deploy_slot(&self, deploy: &orc_proto::Deploy) -> orc_proto::DeployResult {
        match self.start_node(&deploy.node_id).await {
            Ok(node_id) => orc_proto::DeployResult::Deployed(deployed(&deploy.node_id, &node_id)),
            Err(error) => {
                tracing::warn!(node = %deploy.node_id, error = %error.words(), "core deploy refused");
                orc_proto::DeployResult::Refused(orc_proto::Refusal::new(
                    error.refusal_kind(),
                    error.words(),
                ))
            }
        }
    }

    /// Stops the node's slot; a node without a slot is destroyed already.
    pub async fn destroy_slot(&self, node: &NodeId) -> orc_proto::DestroyResult {
        let handle = self.inner.slots.lock().await.remove(node);
        if let Some(handle) = handle {
            handle.stop().await;
            self.release_http_ports(node);
            tracing::info!(node = %node, "core slot stopped");
        }
        orc_proto::DestroyResult::Destroyed
    }

    async fn start_node(&self, node: &NodeId) -> Result<NodeId, LaunchError> {
        let node_id = parse_node(node)?;
        let mut slots = self.inner.slots.lock().await;
        if slots.contains_key(&node_id) {
            return Ok(node_id);
        }
        if *self.inner.shutdown.borrow() {
            return Err(LaunchError::ShuttingDown);
        }
        let (pool, node) = self.core_node(&node_id).await?;
        let handle = self.start_handle(&pool, &node).await?;
        slots.insert(node_id.clone(), handle);
        Ok(node_id)
    }

    async fn start_handle(&self, pool: &Pool, node: &Node) -> Result<SlotHandle, LaunchError> {
        let launch = self.launch_for(pool, node, true).await?;
        let log = self.slot_log(&pool.id, node.slot);
        let status = SlotStatus {
            node_id: node.id.clone(),
            pool_id: pool.id.clone(),
            slot: node.slot,
            generation: launch.generation,
            pid: None,
            up_since: None,
            restarts: 0,
            exits_in_a_row: 0,
            backoff: None,
            last_exit: None,
        };
        let context = SlotContext {
            node_id: node.id.clone(),
            log,
            status: Arc::new(Mutex::new(status)),
            policy: self.inner.config.options.restart,
            stop_grace: self.inner.config.options.stop_grace,
            runtime_root: self.inner.config.runtime_root.clone(),
        };
        let handle = SlotHandle::start(pool.id.clone(), launch, context)?;
        tracing::info!(pool = %pool.id, slot = node.slot, node = %node.id, "core slot started");
        Ok(handle)
    }

    fn slot_log(&self, pool: &PoolId, slot: u32) -> Arc<logs::SlotLog> {
        let path = self.log_file(pool, slot);
        let capacity = self.inner.config.options.log_lines;
        let make = || {
            if let Some(dir) = path.parent() {
                let _ = DirBuilder::new().recursive(true).mode(0o700).create(dir);
            }
            Arc::new(logs::SlotLog::new(slot, capacity, Some(&path)))
        };
        match self.inner.logs.lock() {
            Ok(mut map) => map.entry((pool.clone(), slot)).or_insert_with(make).clone(),
            Err(_) => make(),
        }
    }

    /// The node and its pool, if the pool is on `core`.
    async fn core_node(&self, node_id: &NodeId) -> Result<(Pool, Node), LaunchError> {
        let store_error = |what: String| move |source| LaunchError::Store { what, source };
        let node = self
            .inner
            .store
            .get_node(node_id)
            .await
            .map_err(store_error(format!("node {node_id}")))?;
        let pool = self
            .inner
            .store
            .get_pool(&node.pool_id)
            .await
            .map_err(store_error(format!("pool {}", node.pool_id)))?;
        if pool.spec.provider_id != self.inner.core.id {
            return Err(LaunchError::NotCore {
                node: node_id.clone(),
            });
        }
        Ok((pool, node))
    }

    /// Everything needed to start `node`'s process with `pool`'s current spec. Without
    /// `with_token` no zone token is made and no port is taken (for quotes, which only
    /// check).
    async fn launch_for(
        &self,
        pool: &Pool,
        node: &Node,
        with_token: bool,
    ) -> Result<Launch, LaunchError> {
        let store = &self.inner.store;
        let app = pool.spec.app.as_ref().ok_or_else(|| LaunchError::NoApp {
            pool: pool.id.clone(),
        })?;
        let store_error = |what: String| move |source| LaunchError::Store { what, source };
        let project = store
            .get_project(&pool.project_id)
            .await
            .map_err(store_error(format!("project {}", pool.project_id)))?;
        if project.org_id != sys_org_id() {
            return Err(LaunchError::NotSysOrg {
                pool: pool.id.clone(),
            });
        }
        let org = store
            .get_org(&project.org_id)
            .await
            .map_err(store_error(format!("org {}", project.org_id)))?;
        let pool_dir = self.inner.dir.join(pool.id.as_str());
        let identity = run_as::pool_identity(self.inner.config.run_as, &pool_dir);
        let install = identity.as_ref().map(|identity| InstallFor {
            runtime_root: self.inner.config.runtime_root.clone(),
            dir: run_as::pool_bin_dir(&self.inner.config.runtime_root, &pool.id, &pool_dir),
            gid: identity.gid,
        });
        let binary = match &app.digest {
            Some(digest) => self.registry_binary(&app.package, digest, install).await,
            None => self.inner.config.resolve(&app.package),
        }
        .map_err(|source| LaunchError::Resolve {
            pool: pool.id.clone(),
            source,
        })?;
        let plan = plan_params(app).map_err(|errors| LaunchError::Params {
            pool: pool.id.clone(),
            errors,
        })?;
        let mut secrets = plan.secrets();
        let mut files = plan.files;
        let mut env = plan.env;
        let slot_dir = pool_dir.join(format!("slot-{}", node.slot));
        let runtime_dir = slot_dir.join("run");
        let project_path = format!("{}/{}", org.name, project.name);
        env.insert("ORC_SLOT".into(), node.slot.to_string());
        env.insert("ORC_POOL".into(), format!("{project_path}/{}", pool.name));
        env.insert("ORC_POOL_ID".into(), pool.id.to_string());
        env.insert("ORC_POOL_GENERATION".into(), pool.generation.to_string());
        env.insert("ORC_NODE".into(), node.id.to_string());
        env.insert("ORC_ZONE_GRPC".into(), self.inner.zone.url.clone());
        env.insert("ORC_ZONE_ENDPOINT".into(), self.inner.zone.url.clone());
        if let Some(ca) = &self.inner.zone.ca_pem {
            files.push(ParamFile {
                param: "zone_ca".into(),
                env: "ORC_ZONE_CA_FILE".into(),
                file_name: "zone-ca.pem".into(),
                text: FileText(ca.clone()),
                sensitive: false,
            });
        }
        env.insert("ORC_ZONE_PROJECT".into(), project_path);
        env.insert(
            "ORC_RUNTIME_DIR".into(),
            runtime_dir.to_string_lossy().into_owned(),
        );
        if with_token {
            for endpoint in pool.spec.endpoints.iter().filter(|e| e.protocol == "http") {
                let port = self.http_port(&pool.id, node.slot, &node.id, &endpoint.name)?;
                env.insert(
                    http_env(&endpoint.name),
                    SocketAddr::from((Ipv4Addr::LOCALHOST, port)).to_string(),
                );
            }
            let token = self.pool_token(pool).await?;
            secrets.push(token.expose().to_string());
            files.push(ParamFile {
                param: "zone_token".into(),
                env: "ORC_ZONE_TOKEN_FILE".into(),
                file_name: "zone-token".into(),
                text: FileText(token.expose().to_string()),
                sensitive: true,
            });
        }
        Ok(Launch {
            binary,
            identity,
            env,
            files,
            runtime_dir,
            generation: pool.generation,
            secrets,
        })
    }

    /// The binary of package `digest` of the app `package` names, for the host's platform,
    /// hashed just now; installed where `install` says when slots run as their pool's user.
    async fn registry_binary(
        &self,
        package: &str,
        digest: &Digest,
        install: Option<InstallFor>,
    ) -> Result<AppBinary, ResolveError> {
        let reference = config::parse_package(package)?;
        let unpublished = || ResolveError::NotInstalled {
            package: package.to_string(),
        };
        let broken = |why: String| ResolveError::Binary {
            package: package.to_string(),
            why,
        };
        let store = &self.inner.store;
        let (Ok(org), Ok(name)) = (
            reference.org.parse::<Name>(),
            reference.name.parse::<Name>(),
        ) else {
            return Err(unpublished());
        };
        let org = match store.org_by_name(&org).await {
            Ok(org) => org,
            Err(StoreError::NotFound { .. }) => return Err(unpublished()),
            Err(e) => return Err(broken(format!("reading the registry: {e}"))),
        };
        let found = store
            .app_package(&org.id, &name, digest)
            .await
            .map_err(|e| broken(format!("reading the registry: {e}")))?
            .ok_or_else(|| broken(format!("package {digest} is no longer in the registry")))?;
        let host = Platform::host().ok_or_else(|| ResolveError::NoPlatform {
            package: package.to_string(),
            platform: std::env::consts::ARCH.to_string(),
        })?;
        let binary =
            found
                .document
                .binaries
                .get(&host)
                .ok_or_else(|| ResolveError::NoPlatform {
                    package: package.to_string(),
                    platform: host.to_string(),
                })?;
        let blobs = self.inner.blobs.clone();
        let blob = binary.digest.clone();
        let path = tokio::task::spawn_blocking(move || blobs.runnable(&blob, install.as_ref()))
            .await
            .map_err(|e| broken(format!("checking the binary: {e}")))?
            .map_err(|e| broken(e.to_string()))?;
        Ok(AppBinary {
            path,
            args: found.document.manifest.args.clone(),
            env: self.inner.config.env_of(name.as_str()),
            sensitive_params: found.document.manifest.sensitive_params(),
        })
    }

    /// The zone token of a pool's apps: a token of the apps user, who is a member of the
    /// pool's project. Made once per zone process; earlier tokens of the pool are revoked.
    async fn pool_token(&self, pool: &Pool) -> Result<TokenSecret, LaunchError> {
        let mut tokens = self.inner.tokens.lock().await;
        if let Some(token) = tokens.get(&pool.id) {
            return Ok(token.clone());
        }
        let store = &self.inner.store;
        let user = &self.inner.apps_user;
        let store_error = |what: &str| {
            let what = format!("{what} of pool {}", pool.id);
            move |source| LaunchError::Store { what, source }
        };
        // The pool's service credential: bound to the pool, it opens only the pool's
        // provider stream in the pool's project; the apps user holds no role anywhere.
        // Making it revokes the pool's earlier credentials.
        let now = Timestamp::now();
        let label = format!("app pool {}", pool.id);
        let (_, secret) = store
            .create_service_token(
                user,
                &pool.id,
                &label,
                Some(now.plus_days(SERVICE_TOKEN_DAYS)),
                now,
            )
            .await
            .map_err(store_error("a new service credential"))?;
        tokens.insert(pool.id.clone(), secret.clone());
        Ok(secret)
    }

    /// One comparison of held slots with the store.
    async fn supervise_once(&self) -> Result<(), StoreError> {
        let store = &self.inner.store;
        let settle = self.inner.config.options.settle;
        let mut slots = self.inner.slots.lock().await;
        let pools: Vec<Pool> = store
            .list_all_pools()
            .await?
            .into_iter()
            .filter(|p| p.spec.provider_id == self.inner.core.id)
            .collect();
        let mut live = BTreeSet::new();
        for pool in &pools {
            let nodes = store.list_nodes_by_pool(&pool.id, false).await?;
            for node in &nodes {
                live.insert(node.id.clone());
                if node.status.state == NodeState::Running && !slots.contains_key(&node.id) {
                    match self.start_handle(pool, node).await {
                        Ok(handle) => {
                            slots.insert(node.id.clone(), handle);
                            if let Ok(mut failed) = self.inner.adopt_failed.lock() {
                                failed.remove(&node.id);
                            }
                        }
                        Err(error) => {
                            let first = self
                                .inner
                                .adopt_failed
                                .lock()
                                .map(|mut f| f.insert(node.id.clone()))
                                .unwrap_or(true);
                            if first {
                                tracing::warn!(node = %node.id, error = %error.words(), "cannot start the slot of a running core node");
                            }
                        }
                    }
                }
            }
            let attached = self.attached(&pool.id);
            let views: Vec<SlotView> = slots
                .values()
                .filter(|h| h.pool_id == pool.id)
                .filter_map(SlotHandle::snapshot)
                .map(|s| SlotView {
                    slot: s.slot,
                    generation: s.generation,
                    up_for: s.up_since.map(|t: Instant| t.elapsed()),
                    registered: attached.as_ref().map(|attached| {
                        match s.pid.and_then(|pid| attached.get(&pid)) {
                            Some(true) => Registered::Serving,
                            Some(false) => Registered::Standby,
                            None => Registered::No,
                        }
                    }),
                })
                .collect();
            match next_rollout_step(pool.generation, &views, settle) {
                RolloutStep::Done | RolloutStep::Wait => {}
                RolloutStep::Replace(slot) => {
                    let Some(node) = nodes.iter().find(|n| n.slot == slot) else {
                        continue;
                    };
                    let Some(handle) = slots.get(&node.id) else {
                        continue;
                    };
                    match self.launch_for(pool, node, true).await {
                        Ok(launch) => {
                            tracing::info!(pool = %pool.id, slot, generation = pool.generation, "replacing core slot");
                            handle.replace(launch);
                        }
                        Err(error) => {
                            tracing::warn!(pool = %pool.id, slot, error = %error.words(), "cannot replace core slot");
                        }
                    }
                }
            }
        }
        let gone: Vec<NodeId> = slots
            .keys()
            .filter(|id| !live.contains(*id))
            .cloned()
            .collect();
        let mut stopping = JoinSet::new();
        for id in gone {
            if let Some(handle) = slots.remove(&id) {
                tracing::info!(node = %id, "stopping the slot of a node that ended");
                self.release_http_ports(&id);
                stopping.spawn(handle.stop());
            }
        }
        drop(slots);
        while stopping.join_next().await.is_some() {}
        let live_pools: BTreeSet<&PoolId> = pools.iter().map(|p| &p.id).collect();
        if let Ok(mut logs) = self.inner.logs.lock() {
            logs.retain(|(pool, _), _| live_pools.contains(pool));
        }
        Ok(())
    }
}

async fn supervise_loop(apps: Apps) {
    let mut shutdown = apps.inner.shutdown.subscribe();
    let interval = apps.inner.config.options.poll_interval;
    loop {
        if *shutdown.borrow() {
            return;
        }
        if let Err(error) = apps.supervise_once().await {
            tracing::warn!(%error, "core supervisor pass failed");
        }
        tokio::select! {
            () = tokio::time::sleep(interval) => {}
            _ = shutdown.changed() => return,
        }
    }
}

fn parse_node(node: &NodeId) -> Result<NodeId, LaunchError> {
    NodeId::parse_minted(node.as_str()).map_err(|e| LaunchError::Store {
        what: format!("node {}", node.as_str()),
        source: StoreError::Invalid {
            kind: Kind::Node,
            id: node.as_str().to_string(),
            reason: e.to_string(),
        },
    })
}

/// The variable that hands a slot the address of its http endpoint `name`:
/// `ORC_HTTP_<NAME>_ADDR`, upper case, `-` as `_`.
pub fn http_env(name: &str) -> String {
    format!(
        "ORC_HTTP_{}_ADDR",
        name.to_ascii_uppercase().replace('-', "_")
    )
}

fn site() -> orc_proto::SiteName {
    orc_proto::SiteName::new(CORE_LOCAL_SITE).expect("the local site name is not empty")
}

fn refusal_reply(kind: orc_proto::RefusalKind, words: &str) -> orc_proto::QuoteReply {
    orc_proto::QuoteReply::Refused(orc_proto::Refusal::new(kind, words))
}

fn deployed(node: &NodeId, node_id: &NodeId) -> orc_proto::Deployed {
    orc_proto::Deployed {
        node_id: node.clone(),
        site: site(),
        addresses: vec![IpAddr::V4(Ipv4Addr::LOCALHOST)],
        price: None,
        instance_ref: orc_proto::InstanceRef::new(format!("core/{node_id}"))
            .expect("a core instance ref is never empty"),
        placed: None,
    }
}

async fn ensure_core_provider(store: &Store) -> Result<Provider, AppsError> {
    let store_error = |what| move |source| AppsError::Store { what, source };
    let core_name: Name = CORE_PROVIDER
        .parse()
        .map_err(|e: ModelError| AppsError::Store {
            what: "the core provider's name",
            source: StoreError::Invalid {
                kind: Kind::Provider,
                id: CORE_PROVIDER.to_string(),
                reason: e.to_string(),
            },
        })?;
    let find = || async {
        store
            .list_providers_for(&sys_project_id())
            .await
            .map(|all| {
                all.into_iter()
                    .find(|p| p.project_id == sys_project_id() && p.name == core_name)
            })
    };
    let existing = find().await.map_err(store_error("listing providers"))?;
    let provider = match existing {
        Some(provider) => provider,
        None => {
            let new = NewProvider {
                project_id: sys_project_id(),
                name: core_name.clone(),
                resource_uri: CORE_RESOURCE_URI.to_string(),
                scope: ProviderScope::Zone,
                pricing: PricingStrategy::None,
            };
            match store.create_provider(&new, Timestamp::now()).await {
                Ok(provider) => provider,
                Err(StoreError::Unique { .. }) => find()
                    .await
                    .map_err(store_error("reading the core provider"))?
                    .ok_or_else(|| AppsError::Store {
                        what: "the core provider",
                        source: StoreError::NotFound {
                            kind: Kind::Provider,
                            id: CORE_PROVIDER.to_string(),
                        },
                    })?,
                Err(source) => {
                    return Err(AppsError::Store {
                        what: "creating the core provider",
                        source,
                    });
                }
            }
        }
    };
    if provider.scope == ProviderScope::Zone {
        Ok(provider)
    } else {
        store
            .set_provider_scope(&provider.id, ProviderScope::Zone, Timestamp::now())
            .await
            .map_err(store_error("widening the core provider to scope zone"))
    }
}

/// How long an app pool's service credential is valid: 30 days. A new one is made at every
/// zone start (revoking the old), so it outlives no zone process by long.
const SERVICE_TOKEN_DAYS: i64 = 30;

/// Takes every role and every non-service token from the apps user: an older zone made it a
/// member of each app pool's project with tokens that worked on the whole API.
async fn retire_shared_powers(store: &Store, user: &UserId) -> Result<(), AppsError> {
    let failed = |what: &'static str| move |source| AppsError::Store { what, source };
    for membership in store
        .list_memberships_of_user(user)
        .await
        .map_err(failed("reading the apps user's memberships"))?
    {
        store
            .remove_membership(&membership.id)
            .await
            .map_err(failed("removing a membership of the apps user"))?;
        tracing::info!(membership = %membership.id, "removed a role of the apps user; app pools use service credentials");
    }
    let now = Timestamp::now();
    for token in store
        .list_tokens(user)
        .await
        .map_err(failed("reading the apps user's tokens"))?
    {
        if token.service_pool.is_none() && token.revoked_at.is_none() {
            store
                .revoke_token(&token.id, now)
                .await
                .map_err(failed("revoking an old app token"))?;
        }
    }
    Ok(())
}

async fn ensure_apps_user(store: &Store) -> Result<UserId, AppsError> {
    let name: Name = APPS_USER
        .parse()
        .map_err(|e: ModelError| AppsError::Store {
            what: "the apps user's name",
            source: StoreError::Invalid {
                kind: Kind::User,
                id: APPS_USER.to_string(),
                reason: e.to_string(),
            },
        })?;
    match store.user_by_name(&name).await {
        Ok(user) => Ok(user.id),
        Err(StoreError::NotFound { .. }) => {
            match store.create_user(&name, Timestamp::now()).await {
                Ok(user) => Ok(user.id),
                Err(StoreError::Unique { .. }) => store
                    .user_by_name(&name)
                    .await
                    .map(|u| u.id)
                    .map_err(|source| AppsError::Store {
                        what: "reading the apps user",
                        source,
                    }),
                Err(source) => Err(AppsError::Store {
                    what: "creating the apps user",
                    source,
                }),
            }
        }
        Err(source) => Err(AppsError::Store {
            what: "reading the apps user",
            source,
        }),
    }
}

impl EndpointDirectory for Apps {
    fn http_endpoints(&self, pool: &PoolId) -> Vec<(u32, String, SocketAddr)> {
        Apps::http_endpoints(self, pool)
    }
}
