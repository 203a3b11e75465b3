//! How a zone is configured, where it listens, and why it may fail to start.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use orc_web::edge::EdgeConfig;

use crate::agents::AgentHubOptions;
use crate::api::ApiLimits;
use crate::apps::{AppsConfig, AppsError};
use crate::hub::HubOptions;
use crate::mesh::MeshOptions;
use crate::reconcile::ReconcileOptions;
use crate::store::StoreError;

/// Default address of the HTTP API.
pub const DEFAULT_HTTP_ADDR: &str = "127.0.0.1:7070";
/// Default address of the providers' gRPC endpoint.
pub const DEFAULT_GRPC_ADDR: &str = "127.0.0.1:7400";
/// File in the data dir holding the sealing key, unless the config names another.
pub const SEALING_KEY_FILE: &str = "sealing-key";
/// File in the data dir holding the CA's key.
pub const CA_KEY_FILE: &str = "ca-key.pem";

/// TLS on the zone's listeners.
#[derive(Debug, Clone)]
pub struct TlsConfig {
    /// Serve plain HTTP and h2c instead: refused unless both listen addresses are loopback.
    pub plain: bool,
    /// Names the server certificate carries besides `localhost`, `127.0.0.1`, `::1` and the
    /// listen addresses: the DNS names and addresses clients on other machines dial.
    pub names: Vec<String>,
    /// How long a server certificate is valid; the zone signs one at start and renews it
    /// when a third of this is left. Default 30 days.
    pub cert_lifetime: Duration,
}

impl Default for TlsConfig {
    fn default() -> Self {
        TlsConfig {
            plain: false,
            names: Vec::new(),
            cert_lifetime: orc_tls::ca::SERVER_CERT_LIFETIME,
        }
    }
}

/// Timeouts and limits of the zone's listeners (the API, the provider endpoint and the
/// access edge).
#[derive(Debug, Clone)]
pub struct ListenLimits {
    /// Open connections per listener at most. Default 1024.
    pub max_connections: usize,
    /// Open connections per listener from one source (an IPv4 address, an IPv6 /64) at
    /// most; `None`: a quarter of `max_connections`. Beyond the connection limits, each
    /// listener keeps a tenth of its slots for connections that authenticate and shortens
    /// its handshake and idle timeouts under pressure ([`orc_tls::serve`]).
    pub max_connections_per_source: Option<usize>,
    /// From accept to a finished TLS handshake. Default 10 s.
    pub handshake_timeout: Duration,
    /// From a request's first byte to the end of its headers. Default 10 s.
    pub header_read_timeout: Duration,
    /// A connection with no request in flight this long is closed. Default 60 s.
    pub idle_timeout: Duration,
    /// HTTP/2 keep-alive pings, and how long one may go unanswered. Default 20 s.
    pub keepalive_interval: Duration,
    /// The API's request timeout and concurrency limit.
    pub api: ApiLimits,
}

impl Default for ListenLimits {
    fn default() -> Self {
        let serve = orc_tls::ServeOptions::default();
        ListenLimits {
            max_connections: serve.max_connections,
            max_connections_per_source: serve.max_connections_per_source,
            handshake_timeout: serve.handshake_timeout,
            header_read_timeout: serve.header_read_timeout,
            idle_timeout: serve.idle_timeout,
            keepalive_interval: serve.keepalive_interval,
            api: ApiLimits::default(),
        }
    }
}

impl ListenLimits {
    pub(super) fn serve_options(
        &self,
        tls: Option<Arc<orc_tls::rustls::ServerConfig>>,
    ) -> orc_tls::ServeOptions {
        orc_tls::ServeOptions {
            tls,
            max_connections: self.max_connections,
            max_connections_per_source: self.max_connections_per_source,
            handshake_timeout: self.handshake_timeout,
            header_read_timeout: self.header_read_timeout,
            idle_timeout: self.idle_timeout,
            keepalive_interval: self.keepalive_interval,
            ..orc_tls::ServeOptions::default()
        }
    }
}

/// How to run a zone.
#[derive(Debug, Clone)]
pub struct ZoneConfig {
    /// Where the zone keeps its files (created if missing).
    pub data_dir: PathBuf,
    /// `postgres://…` to keep the store in PostgreSQL; `None` for SQLite in the data dir.
    pub database_url: Option<String>,
    /// The sealing key's file; `None` for `<data dir>/sealing-key` (made on first start).
    pub sealing_key_file: Option<PathBuf>,
    /// Where the HTTP API listens (port 0 picks a free port).
    pub http_addr: SocketAddr,
    /// Where providers dial in over gRPC (port 0 picks a free port).
    pub grpc_addr: SocketAddr,
    /// A second address the HTTP API listens on, for nodes that cannot reach `http_addr`
    /// (`orc up --netns`: the host's end of the emulated internet). Nodes download the agent
    /// and pull images there. `None`: nodes use `http_addr` (or `agent_url`'s host).
    pub node_http_addr: Option<SocketAddr>,
    /// How long a replica a rollout takes away keeps running after it left its service's
    /// names, so requests that found it finish. Default 5 s.
    pub replica_drain: Duration,
    /// The built-in `core` provider: which binaries apps run.
    pub apps: AppsConfig,
    /// Timings of the reconcilers.
    pub reconcile: ReconcileOptions,
    /// Timeouts of the provider hub.
    pub hub: HubOptions,
    /// Timeouts of the agent hub.
    pub agents: AgentHubOptions,
    /// The mesh: its range, quarantine and pace.
    pub mesh: MeshOptions,
    /// The URL nodes dial for the agent endpoint (`https://zone.example.net:7400`); `None`
    /// for the provider endpoint's own URL, which only nodes on this host can dial.
    pub agent_url: Option<String>,
    /// The `orc` binary nodes install from `GET /api/agent/orc` (`orc zone serve` and
    /// `orc up` serve themselves); `None` serves none, and nodes must bring `orc`.
    pub agent_binary: Option<PathBuf>,
    /// TLS on both listeners.
    pub tls: TlsConfig,
    /// Timeouts and limits of the listeners.
    pub limits: ListenLimits,
    /// The access edge; `None` runs none. It needs TLS: a plain zone runs none.
    pub edge: Option<EdgeConfig>,
    /// The zone's web URL as people and apps reach it (`https://zone.example.net:7070`):
    /// the issuer of the edge's assertions, whose JWKS apps fetch (their `access_keys_url`
    /// is this URL with `/.well-known/orc-access/jwks.json`). `None`: the API's own URL.
    pub web_url: Option<String>,
    /// Where certificates for apps' domains come from (ACME); `None` obtains none, and
    /// domains are served over plain HTTP only. Let's Encrypt unless told otherwise.
    pub acme: Option<crate::certificates::AcmeConfig>,
}

impl ZoneConfig {
    /// A config with the default addresses and SQLite in `data_dir`.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        ZoneConfig {
            data_dir: data_dir.into(),
            database_url: None,
            sealing_key_file: None,
            http_addr: SocketAddr::from(([127, 0, 0, 1], 7070)),
            grpc_addr: SocketAddr::from(([127, 0, 0, 1], 7400)),
            node_http_addr: None,
            replica_drain: crate::rollouts::DEFAULT_DRAIN,
            apps: AppsConfig::default(),
            reconcile: ReconcileOptions::default(),
            hub: HubOptions::default(),
            agents: AgentHubOptions::default(),
            mesh: MeshOptions::default(),
            agent_url: None,
            agent_binary: None,
            tls: TlsConfig::default(),
            limits: ListenLimits::default(),
            edge: Some(EdgeConfig::default()),
            web_url: None,
            acme: Some(crate::certificates::AcmeConfig::lets_encrypt()),
        }
    }

    /// A config for tests: loopback, free ports.
    pub fn ephemeral(data_dir: impl Into<PathBuf>) -> Self {
        ZoneConfig {
            http_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            grpc_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            edge: Some(EdgeConfig {
                addr: SocketAddr::from(([127, 0, 0, 1], 0)),
                ..EdgeConfig::default()
            }),
            // Tests never reach a real directory.
            acme: None,
            ..ZoneConfig::new(data_dir)
        }
    }
}

/// Why a zone could not start.
#[derive(Debug, thiserror::Error)]
pub enum ZoneError {
    /// The ACME directory cannot be used as configured (its CA file).
    #[error("ACME: {0}")]
    Acme(String),
    /// The data dir or a file in it could not be created, read or written.
    #[error("cannot use {path}")]
    DataDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The data dir is open to other users, who could read the store and the keys in it.
    #[error(
        "the data dir {path} can be entered or read by other users (mode {mode:04o}); \
         make it private with: chmod 700 {path}"
    )]
    DataDirOpen { path: PathBuf, mode: u32 },
    /// Plain listeners were asked for on an address other machines can reach.
    #[error(
        "plain HTTP was asked for, but the {what} listens on {addr}, which is not loopback; \
         plain listeners are allowed only on 127.0.0.1 or ::1 (drop --plain to serve TLS)"
    )]
    PlainOffLoopback {
        what: &'static str,
        addr: SocketAddr,
    },
    /// The CA could not be read or made, or refused to sign.
    #[error(transparent)]
    Ca(#[from] orc_tls::CaError),
    /// The sealing key could not be read or made.
    #[error(transparent)]
    SealingKey(#[from] orc_zone_store::SealError),
    /// The store could not be opened or prepared.
    #[error("the store could not be opened")]
    Store(#[source] StoreError),
    /// The `core` provider (apps supervisor) could not start.
    #[error("the apps supervisor could not start")]
    Apps(#[source] AppsError),
    /// The access edge's keys could not be read or made.
    #[error("the access keys cannot be used")]
    AccessKeys(#[source] orc_web::access_keys::AccessKeyError),
    /// The mesh range overlaps another range, or no longer holds a project's prefix.
    #[error("the mesh range cannot be used")]
    MeshRange(#[source] crate::mesh::MeshRangeError),
    /// A listener could not be bound.
    #[error("cannot listen for the {what} on {addr}")]
    Bind {
        what: &'static str,
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}
