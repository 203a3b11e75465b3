//! A running zone: the store, the provider hub's gRPC server, the apps supervisor (`core`
//! provider), the reconcilers and the HTTP API, assembled and stopped together.
//!
//! [`Zone::start`] opens the store (SQLite in the data dir unless a PostgreSQL URL is given),
//! makes sure the first operator exists, binds the listeners and starts every part;
//! [`Zone::shutdown`] stops the API (finishing requests in flight), then the other parts, then
//! closes the store. Starting again on the same data dir resumes: the store keeps all state,
//! and the admin token file is reused.
//!
//! The data dir is private to the user the zone runs as: created 0700, and a zone refuses to
//! start on one that other users can enter or read ([`ZoneError::DataDirOpen`]); every file
//! directly in it is made 0600 at each start, whoever created it. Files in the data dir:
//! - `zone.db` (with `-wal`, `-shm`) — the SQLite store (when no database URL is given);
//! - `sealing-key` — the key sensitive params are sealed with in the store, made on first
//!   start unless [`ZoneConfig::sealing_key_file`] names another file (a zone on PostgreSQL
//!   with several controllers gives each the same key file);
//! - `admin-token` — the first operator's API token, written once;
//! - `ca.pem`, `ca-key.pem` — the zone's CA (ECDSA P-256), made on first start; the API
//!   and the provider endpoint present certificates it signs, and clients pin `ca.pem`;
//! - `zone-url` — the API's URL, rewritten at every start, so the CLI finds a local zone.
//!
//! Both listeners speak TLS unless [`TlsConfig::plain`] asks for plain text, which the zone
//! accepts only when both addresses are loopback.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use std::time::Duration;

use orc_tls::ZoneCa;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::agents::{AgentBinary, AgentBootstrap, AgentHub, AgentHubOptions, ExecError, ExecEvent};
use crate::api::views::{LogLineView, ReplicaView};
use crate::api::{
    self, AgentAccess, ApiLimits, ApiState, LogSource, LogsFuture, ProviderDirectory,
};
use crate::apps::{Apps, AppsConfig, AppsError, ZoneEndpoint};
use crate::backend::Backends;
use orc_web::access_keys::AccessKeys;
use orc_web::console::Console;
use orc_web::edge::{EdgeCerts, EdgeConfig, EdgeState};

use crate::hub::{Hub, HubOptions};
use crate::mesh::{MeshChange, MeshHandle, MeshOptions, MeshSignal};
use crate::model::{Name, Pool, Provider, Role, TokenSecret, sys_org_id};
use crate::reconcile::{ReconcileOptions, ReconcilerHandle, Reconcilers};
use crate::store::{SealingKey, Store, StoreError, sqlite_url};
use crate::web::{ApiInProcess, StoreForEdge};
use orc_common::time::{SharedClock, SystemClock};

/// Default address of the HTTP API.
pub const DEFAULT_HTTP_ADDR: &str = "127.0.0.1:7070";
/// Default address of the providers' gRPC endpoint.
pub const DEFAULT_GRPC_ADDR: &str = "127.0.0.1:7400";
/// File in the data dir holding the admin token.
pub const ADMIN_TOKEN_FILE: &str = "admin-token";
/// File in the data dir holding the API's URL.
pub const ZONE_URL_FILE: &str = "zone-url";
/// File in the data dir holding the sealing key, unless the config names another.
pub const SEALING_KEY_FILE: &str = "sealing-key";
/// File in the data dir holding the CA certificate clients pin.
pub const CA_CERT_FILE: &str = "ca.pem";
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
    fn serve_options(
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

/// The data dir used when none is given: `$ORC_DATA_DIR`, else `$XDG_DATA_HOME/orc`, else
/// `$HOME/.local/share/orc`, else `./.orc`.
pub fn default_data_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("ORC_DATA_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("orc");
    }
    if let Some(home) = std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(home).join(".local/share/orc");
    }
    PathBuf::from(".orc")
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
            ..ZoneConfig::new(data_dir)
        }
    }
}

/// Why a zone could not start.
#[derive(Debug, thiserror::Error)]
pub enum ZoneError {
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

/// A running zone. Stop it with [`Zone::shutdown`].
#[derive(Debug)]
pub struct Zone {
    store: Store,
    access_keys: Arc<AccessKeys>,
    data_dir: PathBuf,
    http_addr: SocketAddr,
    grpc_addr: SocketAddr,
    admin_token: TokenSecret,
    admin_token_is_new: bool,
    hub: Hub,
    agents: AgentHub,
    apps: Apps,
    reconcilers: ReconcilerHandle,
    mesh: MeshHandle,
    stop: watch::Sender<bool>,
    http_task: JoinHandle<std::io::Result<()>>,
    grpc_task: JoinHandle<std::io::Result<()>>,
    edge: Option<RunningEdge>,
    web_url: String,
    ca: Option<Arc<ZoneCa>>,
    renew_task: Option<JoinHandle<()>>,
    /// Removes unused registry packages and binaries hourly.
    registry_sweeper: JoinHandle<()>,
}

impl Zone {
    /// Opens the store, makes sure the first operator exists, and starts every part.
    pub async fn start(config: ZoneConfig) -> Result<Zone, ZoneError> {
        let data_dir = config.data_dir.clone();
        if config.tls.plain {
            for (what, addr) in [
                ("API", config.http_addr),
                ("provider endpoint", config.grpc_addr),
            ] {
                if !addr.ip().is_loopback() {
                    return Err(ZoneError::PlainOffLoopback { what, addr });
                }
            }
        }
        prepare_data_dir(&data_dir)?;
        let ca = if config.tls.plain {
            None
        } else {
            let (ca, is_new) =
                ZoneCa::load_or_create(&data_dir.join(CA_CERT_FILE), &data_dir.join(CA_KEY_FILE))?;
            if is_new {
                tracing::info!(fingerprint = %ca.fingerprint(), "the zone's CA was created; clients pin {CA_CERT_FILE}");
            }
            Some(Arc::new(ca))
        };
        let url = match &config.database_url {
            Some(url) => url.clone(),
            None => {
                let db = data_dir.join("zone.db");
                // SQLite makes its `-wal` and `-shm` files with the mode of the database file.
                touch_private(&db)?;
                sqlite_url(&db)
            }
        };
        let key_file = config
            .sealing_key_file
            .clone()
            .unwrap_or_else(|| data_dir.join(SEALING_KEY_FILE));
        let (key, key_is_new) = SealingKey::load_or_create(&key_file)?;
        if key_is_new {
            tracing::info!(path = %key_file.display(), key = key.id(), "sealing key created; back it up with the store");
        }
        let store = Store::open(&url).await.map_err(ZoneError::Store)?;
        match store.set_sealing_key(key).await {
            Ok(0) => {}
            Ok(resealed) => {
                tracing::info!(resealed, "sensitive params stored in clear were sealed");
            }
            Err(e) => {
                store.close().await;
                return Err(ZoneError::Store(e));
            }
        }
        tighten_files(&data_dir)?;
        let edge_store: Arc<dyn orc_web::store::EdgeStore> = Arc::new(StoreForEdge(store.clone()));
        let access_keys =
            match AccessKeys::load(edge_store.clone(), crate::model::Timestamp::now()).await {
                Ok(keys) => Arc::new(keys),
                Err(e) => {
                    store.close().await;
                    return Err(ZoneError::AccessKeys(e));
                }
            };
        if let Err(e) = crate::mesh::check_range(&store, &config.mesh).await {
            store.close().await;
            return Err(ZoneError::MeshRange(e));
        }
        let (admin_token, admin_token_is_new) = ensure_admin(&store, &data_dir).await?;

        let (http, http_addr) = bind("HTTP API", config.http_addr).await?;
        let (grpc, grpc_addr) = bind("provider gRPC endpoint", config.grpc_addr).await?;
        let edge_listener = match (&config.edge, &ca) {
            (Some(edge), Some(_)) => Some(bind("access edge", edge.addr).await?),
            (Some(_), None) => {
                tracing::info!("the access edge needs TLS: a plain zone runs none");
                None
            }
            (None, _) => None,
        };
        let (stop, stopped) = watch::channel(false);
        let scheme = if ca.is_some() { "https" } else { "http" };

        let (api_tls, grpc_tls, renew_task) = match &ca {
            None => (None, None, None),
            Some(ca) => {
                let mut extra = config.tls.names.clone();
                // Nodes check the name they dial.
                extra.extend(config.agent_url.as_deref().and_then(url_host));
                let names = server_names(&extra, [http_addr, grpc_addr]);
                let cert =
                    orc_tls::RenewingCert::new(ca.issue_server(&names, config.tls.cert_lifetime)?)?;
                let renew = tokio::spawn(cert.clone().keep_renewed(
                    ca.clone(),
                    names,
                    config.tls.cert_lifetime,
                ));
                (
                    Some(orc_tls::server_config(cert.clone(), orc_tls::ALPN_HTTP)),
                    // Agents present node certificates here; providers present none.
                    Some(orc_tls::server_config_with_clients(
                        cert,
                        orc_tls::ALPN_H2,
                        ca.roots(),
                    )),
                    Some(renew),
                )
            }
        };

        let clock: SharedClock = Arc::new(SystemClock);
        let mesh_signal = MeshSignal::default();
        let hub = Hub::new(
            store.clone(),
            HubOptions {
                mesh: Some(mesh_signal.clone()),
                ..config.hub.clone()
            },
        );
        let agents = AgentHub::new(store.clone(), ca.clone(), config.agents.clone());
        let grpc_task = {
            let routes = tonic::service::Routes::new(hub.grpc_service())
                .add_service(agents.grpc_service())
                .prepare();
            let options = orc_tls::ServeOptions {
                what: "provider and agent endpoint",
                http2_only: true,
                ..config.limits.serve_options(grpc_tls)
            };
            tokio::spawn(orc_tls::serve(
                grpc,
                routes,
                options,
                wait_for_stop(stopped.clone()),
            ))
        };
        let endpoint = ZoneEndpoint {
            url: format!("{scheme}://{}", dialable(grpc_addr)),
            ca_pem: ca.as_ref().map(|ca| ca.cert_pem().to_string()),
        };
        let apps = match Apps::start(store.clone(), &data_dir, endpoint, config.apps.clone()).await
        {
            Ok(apps) => apps,
            Err(e) => {
                let _ = stop.send(true);
                hub.shutdown();
                agents.shutdown();
                store.close().await;
                return Err(ZoneError::Apps(e));
            }
        };
        apps.watch_registrations(Arc::new(HubRegistrations(hub.clone())));
        let agent_url = config
            .agent_url
            .clone()
            .unwrap_or_else(|| format!("{scheme}://{}", dialable(grpc_addr)));
        let binary = match &config.agent_binary {
            Some(path) => {
                let host = config
                    .agent_url
                    .as_deref()
                    .and_then(url_host)
                    .unwrap_or_else(|| dialable(http_addr).ip().to_string());
                let url = format!(
                    "{scheme}://{}/api/agent/orc",
                    join_host_port(&host, http_addr.port())
                );
                Some(served_binary(path, url).await?)
            }
            None => None,
        };
        let mut reconcile = config.reconcile.clone();
        if let Some(ca) = &ca {
            reconcile.bootstrap = Some(Arc::new(AgentBootstrap {
                endpoint: agent_url.clone(),
                ca_pem: ca.cert_pem().to_string(),
                ca_fingerprint: ca.fingerprint(),
                binary: binary.as_ref().map(|(_, b)| b.clone()),
                ttl: orc_zone_model::JoinTtl::default(),
            }));
        }
        let backends = Backends::new(hub.clone(), apps.clone());
        let mesh = MeshHandle::spawn(
            store.clone(),
            agents.clone(),
            clock.clone(),
            config.mesh.clone(),
            mesh_signal,
        );
        reconcile.mesh_wake = Some(mesh.signal());
        let reconcilers =
            Reconcilers::spawn(store.clone(), backends.clone(), clock.clone(), reconcile);
        let reconciler = reconcilers.reconciler().clone();
        let state = ApiState::new(store.clone())
            .with_backends(backends)
            .with_directory(Arc::new(HubDirectory(hub.clone())))
            .with_logs(Arc::new(AppsLogs(apps.clone())))
            .with_agents(Arc::new(AgentDirectory {
                hub: agents.clone(),
                endpoint: agent_url,
            }))
            .with_apps(config.apps.clone())
            .with_registry(apps.blobs().clone())
            .with_mesh(config.mesh.clone(), mesh.signal())
            .with_access_keys(access_keys.clone())
            .with_waker({
                let mesh = mesh.signal();
                move || {
                    reconciler.wake();
                    mesh.changed(MeshChange::Everything);
                }
            })
            .with_clock(move || clock.now());
        let state = match binary {
            Some((served, _)) => state.with_agent_binary(served),
            None => state,
        };
        let zone_url = format!("{scheme}://{}", dialable(http_addr));
        let web_url = config
            .web_url
            .as_deref()
            .map_or_else(|| zone_url.clone(), |u| u.trim_end_matches('/').to_string());
        let edge = match (edge_listener, &config.edge, &ca) {
            (Some((listener, addr)), Some(edge_config), Some(ca)) => {
                let certs = Arc::new(EdgeCerts::new(
                    ca.clone(),
                    &edge_config.domain,
                    config.tls.cert_lifetime,
                ));
                let edge_state = EdgeState::new(
                    edge_store.clone(),
                    access_keys.clone(),
                    Arc::new(apps.clone()),
                    web_url.clone(),
                    edge_config.clone(),
                    addr.port(),
                );
                let url = edge_state.url();
                let links = api::EdgeLinks {
                    domain: edge_state.domain().to_string(),
                    port: edge_state.port(),
                    endpoints: Arc::new(apps.clone()),
                };
                // The console on the edge's host calls the same API, edge links included.
                let console_api = state.clone().with_edge(links.clone());
                let console = Console::new(
                    Arc::new(ApiInProcess(api::router(console_api.clone()))),
                    move || console_api.now(),
                );
                let edge_state = edge_state.with_console(console);
                let task = tokio::spawn(orc_web::edge::serve(
                    listener,
                    edge_state,
                    config.limits.serve_options(Some(certs.server_config())),
                    wait_for_stop(stopped.clone()),
                ));
                let sweeper = tokio::spawn(orc_web::edge::sweep_sessions(
                    edge_store.clone(),
                    Duration::from_secs(3600),
                ));
                Some(RunningEdge {
                    addr,
                    url,
                    links,
                    task,
                    sweeper,
                })
            }
            _ => None,
        };
        let state = match &edge {
            Some(running) => state.with_edge(running.links.clone()),
            None => state,
        };
        let registry_sweeper = tokio::spawn(api::registry::sweep(
            state.clone(),
            Duration::from_secs(3600),
        ));
        let http_task = tokio::spawn(api::serve(
            http,
            state,
            config.limits.serve_options(api_tls),
            config.limits.api.clone(),
            wait_for_stop(stopped),
        ));

        let url_file = data_dir.join(ZONE_URL_FILE);
        write_private_file(&url_file, &zone_url).map_err(|source| ZoneError::DataDir {
            path: url_file,
            source,
        })?;
        match &edge {
            Some(edge) => {
                tracing::info!(%http_addr, %grpc_addr, edge = %edge.addr, "zone started");
            }
            None => tracing::info!(%http_addr, %grpc_addr, "zone started"),
        }

        Ok(Zone {
            store,
            access_keys: access_keys.clone(),
            data_dir,
            http_addr,
            grpc_addr,
            admin_token,
            admin_token_is_new,
            hub,
            agents,
            apps,
            reconcilers,
            mesh,
            stop,
            http_task,
            grpc_task,
            edge,
            web_url,
            ca,
            renew_task,
            registry_sweeper,
        })
    }

    /// The store the zone runs on.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The data dir.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// Where the HTTP API listens.
    pub fn http_addr(&self) -> SocketAddr {
        self.http_addr
    }

    /// The API's base URL, `https://ADDR` (`http://` when plain; loopback when it listens
    /// on every address).
    pub fn url(&self) -> String {
        format!("{}://{}", self.scheme(), dialable(self.http_addr))
    }

    fn scheme(&self) -> &'static str {
        if self.ca.is_some() { "https" } else { "http" }
    }

    /// The zone's CA certificate in PEM form, which clients pin; `None` when plain.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca.as_ref().map(|ca| ca.cert_pem())
    }

    /// The zone's CA; `None` when plain.
    pub fn ca(&self) -> Option<&Arc<ZoneCa>> {
        self.ca.as_ref()
    }

    /// The file holding the CA certificate clients pin; `None` when plain.
    pub fn ca_file(&self) -> Option<PathBuf> {
        self.ca.as_ref().map(|_| self.data_dir.join(CA_CERT_FILE))
    }

    /// Where providers dial in.
    pub fn grpc_addr(&self) -> SocketAddr {
        self.grpc_addr
    }

    /// The gRPC URL providers dial, `https://ADDR` (`http://` when plain).
    pub fn grpc_url(&self) -> String {
        format!("{}://{}", self.scheme(), dialable(self.grpc_addr))
    }

    /// The zone's web URL as people and apps reach it ([`ZoneConfig::web_url`], else the
    /// API's URL): the issuer of access assertions, whose JWKS apps fetch.
    pub fn web_url(&self) -> &str {
        &self.web_url
    }

    /// Where the access edge listens; `None` when it runs none.
    pub fn edge_addr(&self) -> Option<SocketAddr> {
        self.edge.as_ref().map(|e| e.addr)
    }

    /// The access edge's URL (`https://orc.localhost:7443`): its sign-in page and the
    /// list of endpoints; `None` when it runs none.
    pub fn edge_url(&self) -> Option<&str> {
        self.edge.as_ref().map(|e| e.url.as_str())
    }

    /// The provider hub (connected replicas, catalogs).
    pub fn hub(&self) -> &Hub {
        &self.hub
    }

    /// The access edge's signing keys.
    pub fn access_keys(&self) -> &Arc<AccessKeys> {
        &self.access_keys
    }

    /// The agent hub (joined nodes' streams).
    pub fn agents(&self) -> &AgentHub {
        &self.agents
    }

    /// The `core` provider (app slots and their logs).
    pub fn apps(&self) -> &Apps {
        &self.apps
    }

    /// Asks the reconcilers and the mesh for a pass now.
    pub fn wake(&self) {
        self.reconcilers.wake();
        self.mesh.wake();
    }

    /// The first operator's token (from `<data_dir>/admin-token`).
    pub fn admin_token(&self) -> &TokenSecret {
        &self.admin_token
    }

    /// Whether this start created the admin token (so it should be shown once).
    pub fn admin_token_is_new(&self) -> bool {
        self.admin_token_is_new
    }

    /// Stops every part: the API first (requests in flight finish), then the reconcilers,
    /// the app slots and the provider streams; closes the store. Nodes keep their state in
    /// the store, so the next start resumes them.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        self.registry_sweeper.abort();
        match self.http_task.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "the API server ended with an error"),
            Err(e) => tracing::warn!(error = %e, "the API server task failed"),
        }
        if let Some(edge) = self.edge {
            edge.sweeper.abort();
            match edge.task.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, "the access edge ended with an error"),
                Err(e) => tracing::warn!(error = %e, "the access edge task failed"),
            }
        }
        self.reconcilers.shutdown().await;
        self.mesh.shutdown().await;
        self.apps.shutdown().await;
        self.hub.shutdown();
        self.agents.shutdown();
        match self.grpc_task.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "the gRPC server ended with an error"),
            Err(e) => tracing::warn!(error = %e, "the gRPC server task failed"),
        }
        if let Some(task) = self.renew_task {
            task.abort();
        }
        self.store.close().await;
    }
}

/// The access edge of a running zone.
#[derive(Debug)]
struct RunningEdge {
    addr: SocketAddr,
    url: String,
    /// What the API says of the edge.
    links: api::EdgeLinks,
    task: JoinHandle<std::io::Result<()>>,
    /// Deletes old sessions hourly.
    sweeper: JoinHandle<()>,
}

/// The host of `url` (`https://HOST:PORT/…`), brackets kept off an IPv6 address.
fn url_host(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split('/').next()?;
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split_once(']')?.0,
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    (!host.is_empty()).then(|| host.to_string())
}

/// `HOST:PORT`, with an IPv6 address in brackets.
fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The binary at `path` as the API serves it, and as bootstraps fetch it from `url`.
async fn served_binary(
    path: &Path,
    url: String,
) -> Result<(api::nodes::ServedBinary, AgentBinary), ZoneError> {
    let owned = path.to_path_buf();
    let sha256 = tokio::task::spawn_blocking(move || api::nodes::file_sha256(&owned))
        .await
        .map_err(|e| ZoneError::DataDir {
            path: path.to_path_buf(),
            source: std::io::Error::other(e),
        })?
        .map_err(|source| ZoneError::DataDir {
            path: path.to_path_buf(),
            source,
        })?;
    let served = api::nodes::ServedBinary {
        path: path.to_path_buf(),
        sha256: sha256.clone(),
    };
    let binary = AgentBinary { url, sha256 };
    Ok((served, binary))
}

/// The names a server certificate carries: loopback, the listen addresses that are not
/// wildcards, and the operator's names.
fn server_names(extra: &[String], addrs: [SocketAddr; 2]) -> Vec<String> {
    let mut names = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    for addr in addrs {
        if !addr.ip().is_unspecified() {
            names.push(addr.ip().to_string());
        }
    }
    names.extend(extra.iter().cloned());
    let mut seen = std::collections::BTreeSet::new();
    names.retain(|n| seen.insert(n.clone()));
    names
}

/// The API's view of the hub's replicas and catalogs.
struct HubDirectory(Hub);

impl ProviderDirectory for HubDirectory {
    fn replicas(&self, provider: &Provider) -> Vec<ReplicaView> {
        self.0
            .replicas_of(provider)
            .into_iter()
            .map(|r| ReplicaView {
                host: r.host,
                pid: r.pid,
                slot: r.slot,
                role: r.role.to_string(),
                connected_since: r.connected_since.millis(),
            })
            .collect()
    }

    fn catalog(&self, provider: &Provider) -> Option<orc_proto::Catalog> {
        self.0.catalog(provider).map(|c| c.catalog)
    }
}

/// Which app slots are attached to the hub as provider replicas, for rolling replacements.
struct HubRegistrations(Hub);

impl crate::apps::Registrations for HubRegistrations {
    fn attached(&self, pool: &crate::model::PoolId) -> Vec<(u32, bool)> {
        self.0.attached_of(&format!("pool:{pool}"))
    }
}

/// The API's way to nodes' agents.
struct AgentDirectory {
    hub: AgentHub,
    endpoint: String,
}

impl AgentAccess for AgentDirectory {
    fn live(&self, node: &crate::model::NodeId) -> Option<crate::model::Timestamp> {
        self.hub.live(node).map(|l| l.last_contact)
    }

    fn exec(
        &self,
        node: &crate::model::NodeId,
        argv: Vec<String>,
        timeout: Duration,
    ) -> Result<tokio::sync::mpsc::Receiver<ExecEvent>, ExecError> {
        self.hub.exec(node, argv, timeout)
    }

    fn ca_fingerprint(&self) -> Option<String> {
        self.hub.ca_fingerprint()
    }

    fn endpoint(&self) -> String {
        self.endpoint.clone()
    }

    fn mesh_of(&self, node: &crate::model::NodeId) -> orc_mesh::MeshConfig {
        self.hub.mesh_of(node)
    }

    fn mesh_status(&self, node: &crate::model::NodeId) -> Option<crate::agents::MeshStatusReport> {
        self.hub.mesh_status(node)
    }
}

/// The API's view of the app slots' logs.
struct AppsLogs(Apps);

impl LogSource for AppsLogs {
    fn logs<'a>(&'a self, pool: &'a Pool, slot: Option<u32>, level: &'a str) -> LogsFuture<'a> {
        Box::pin(async move {
            let min_level = level.parse().map_err(|e| format!("{e}"))?;
            Ok(self
                .0
                .logs(&pool.id, slot, min_level)
                .into_iter()
                .map(|line| LogLineView {
                    at: line.at.millis(),
                    slot: line.slot,
                    level: line.level.as_str().to_string(),
                    message: line.text,
                })
                .collect())
        })
    }
}

/// Binds `addr`, returning the listener and its actual address.
async fn bind(
    what: &'static str,
    addr: SocketAddr,
) -> Result<(TcpListener, SocketAddr), ZoneError> {
    let error = |source| ZoneError::Bind { what, addr, source };
    let listener = TcpListener::bind(addr).await.map_err(error)?;
    let local = listener.local_addr().map_err(error)?;
    Ok((listener, local))
}

/// An address a local client can dial: a wildcard listen address becomes loopback.
fn dialable(addr: SocketAddr) -> SocketAddr {
    if addr.ip().is_unspecified() {
        let ip = match addr.ip() {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
        };
        SocketAddr::new(ip, addr.port())
    } else {
        addr
    }
}

async fn wait_for_stop(mut stopped: watch::Receiver<bool>) {
    // An error means the sender is gone, which also means stop.
    let _ = stopped.wait_for(|stop| *stop).await;
}

/// Creates the data dir 0700 when it is missing; refuses one that other users can enter or
/// read.
pub fn prepare_data_dir(dir: &Path) -> Result<(), ZoneError> {
    let io = |source| ZoneError::DataDir {
        path: dir.to_path_buf(),
        source,
    };
    if !dir.exists() {
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt;
            builder.mode(0o700);
        }
        match builder.create(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io(e)),
        }
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir).map_err(io)?.permissions().mode() & 0o7777;
        if mode & 0o077 != 0 {
            return Err(ZoneError::DataDirOpen {
                path: dir.to_path_buf(),
                mode,
            });
        }
    }
    Ok(())
}

/// Makes every regular file directly in `dir` 0600 (SQLite's files, the token, the key, the
/// URL), whoever made it and whatever mode it was given.
fn tighten_files(dir: &Path) -> Result<(), ZoneError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| ZoneError::DataDir { path, source }
        };
        for entry in std::fs::read_dir(dir).map_err(io(dir))? {
            let entry = entry.map_err(io(dir))?;
            let path = entry.path();
            // `symlink_metadata`: a link is never followed out of the data dir.
            let meta = std::fs::symlink_metadata(&path).map_err(io(&path))?;
            if meta.is_file() && meta.permissions().mode() & 0o077 != 0 {
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                    .map_err(io(&path))?;
            }
        }
    }
    Ok(())
}

/// Creates `path` empty and 0600 if it does not exist.
fn touch_private(path: &Path) -> Result<(), ZoneError> {
    open_private(path, false)
        .map(drop)
        .map_err(|source| ZoneError::DataDir {
            path: path.to_path_buf(),
            source,
        })
}

/// Opens `path` for writing, creating it 0600 if it is missing (and emptying it when
/// `truncate`).
fn open_private(path: &Path, truncate: bool) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(truncate);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)
}

/// How long the admin token the zone writes lives (the API's maximum).
const ADMIN_TOKEN_DAYS: i64 = 365;
/// A zone starting within this many days of the admin token's expiry writes a new one.
const ADMIN_TOKEN_RENEW_DAYS: i64 = 30;

/// Makes sure user `admin` exists with an owner role in org `sys` and a token in
/// `<data_dir>/admin-token`. Returns the token and whether it was created now.
async fn ensure_admin(store: &Store, data_dir: &Path) -> Result<(TokenSecret, bool), ZoneError> {
    let path = data_dir.join(ADMIN_TOKEN_FILE);
    let now = crate::model::Timestamp::now();
    let name: Name = crate::model::ADMIN_USER
        .parse()
        .map_err(|e: crate::model::ModelError| {
            ZoneError::Store(StoreError::Invalid {
                kind: crate::store::Kind::User,
                id: crate::model::ADMIN_USER.to_string(),
                reason: e.to_string(),
            })
        })?;
    let user = match store.user_by_name(&name).await {
        Ok(u) => u,
        Err(StoreError::NotFound { .. }) => {
            let user = store
                .create_user(&name, now)
                .await
                .map_err(ZoneError::Store)?;
            store
                .add_membership(&user.id, &sys_org_id(), None, Role::Owner, now)
                .await
                .map_err(ZoneError::Store)?;
            user
        }
        Err(e) => return Err(ZoneError::Store(e)),
    };
    if let Ok(text) = std::fs::read_to_string(&path) {
        let secret = TokenSecret::from_presented(text.trim().to_string());
        let valid = store
            .authenticate_token(&secret, now)
            .await
            .map_err(ZoneError::Store)?;
        match valid {
            Some(t) if t.user_id == user.id => {
                let renew_after = now.plus_days(ADMIN_TOKEN_RENEW_DAYS);
                if t.expires_at.is_some_and(|at| at <= renew_after) {
                    // Close to expiry: a new one replaces it, and the old one is revoked.
                    let _ = store.revoke_token(&t.id, now).await;
                    tracing::info!(path = %path.display(), "the admin token was close to expiry; writing a new one");
                } else {
                    return Ok((secret, false));
                }
            }
            _ => {
                tracing::warn!(path = %path.display(), "the admin token file holds no valid token; writing a new one");
            }
        }
    }
    let (_, secret) = store
        .create_token(
            &user.id,
            "admin (created at zone start)",
            Some(now.plus_days(ADMIN_TOKEN_DAYS)),
            Some(&crate::model::sys_project_id()),
            now,
        )
        .await
        .map_err(ZoneError::Store)?;
    write_private_file(&path, secret.expose()).map_err(|source| ZoneError::DataDir {
        path: path.clone(),
        source,
    })?;
    Ok((secret, true))
}

/// Writes `text` and a newline to `path`, 0600, replacing it in one rename so a reader (the
/// CLI reading `admin-token`) sees the old content or the new, never half of it.
pub fn write_private_file(path: &Path, text: &str) -> std::io::Result<()> {
    let tmp = path.with_extension("new");
    let mut file = open_private(&tmp, true)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    writeln!(file, "{text}")?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_binary_is_fetched_from_the_host_nodes_dial() {
        assert_eq!(
            url_host("https://zone.example.net:7400"),
            Some("zone.example.net".into())
        );
        assert_eq!(
            url_host("https://[2001:db8::1]:7400/x"),
            Some("2001:db8::1".into())
        );
        assert_eq!(url_host("https://10.0.0.1"), Some("10.0.0.1".into()));
        assert_eq!(url_host("nonsense"), None);
        assert_eq!(join_host_port("2001:db8::1", 7070), "[2001:db8::1]:7070");
        assert_eq!(join_host_port("10.0.0.1", 7070), "10.0.0.1:7070");
    }
}
