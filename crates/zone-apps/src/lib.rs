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
//!
//! Inside, one concern per file: `supervisor.rs` starts and stops the provider and keeps the
//! held slots in step with the store; `backend.rs` answers the node backend's quote, deploy
//! and destroy; `launch.rs` launches one slot; `rows.rs` keeps the store rows `core` needs;
//! `error.rs` says why something could not be done; `slot.rs` runs one slot's process.

mod backend;
pub mod blobs;
pub mod config;
mod error;
mod launch;
pub mod logs;
pub mod params;
pub mod policy;
mod rows;
mod run_as;
mod slot;
mod supervisor;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use orc_zone_model::endpoints::EndpointDirectory;
use orc_zone_model::{NodeId, PoolId, Provider, TokenSecret, UserId};
use orc_zone_store::Store;

pub use blobs::{BlobError, Blobs, InstallFor};
pub use config::{AppBinary, AppsConfig, AppsOptions, ResolveError};
pub use error::{AppsError, LaunchError};
pub use launch::http_env;
pub use logs::{Level, LogLine, LogSource};
pub use params::ParamError;
pub use run_as::{DEFAULT_RUNTIME_ROOT, DYNAMIC_IDS, RunAs};
pub use slot::{INHERITED_ENV, SlotStatus, SpawnError};

use slot::SlotHandle;

/// Name of the built-in provider whose pools run apps on the zone host.
pub const CORE_PROVIDER: &str = orc_zone_model::CORE_PROVIDER_NAME;
/// Resource URI of the `core` provider row.
pub const CORE_RESOURCE_URI: &str = "urn:orc:core";
/// The user whose tokens apps get to dial the zone.
pub const APPS_USER: &str = "sys-apps";
/// How long a `core` offer is honoured.
const OFFER_VALIDITY: Duration = Duration::from_secs(300);

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

impl EndpointDirectory for Apps {
    fn http_endpoints(&self, pool: &PoolId) -> Vec<(u32, String, SocketAddr)> {
        Apps::http_endpoints(self, pool)
    }
}
