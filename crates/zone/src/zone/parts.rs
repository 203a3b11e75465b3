//! The parts of a zone, each started by a builder of its own so a test can start one alone:
//! the CA ([`load_ca`]), the store and what lives in it ([`StorePart`]), the listeners
//! ([`Listeners`], [`ListenerTls`]), the provider and agent hubs ([`Hubs`]), what nodes are
//! given to join ([`AgentSupply`]), the API's state ([`api_state`]) and the access edge
//! ([`RunningEdge`]). [`Zone::start`](super::Zone::start) runs them in order.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use orc_common::time::SharedClock;
use orc_tls::ZoneCa;
use orc_web::access_keys::AccessKeys;
use orc_web::console::Console;
use orc_web::edge::{EdgeCerts, EdgeConfig, EdgeState};
use orc_web::store::EdgeStore;
use orc_zone_api_types::data_dir::CA_CERT_FILE;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::config::{CA_KEY_FILE, SEALING_KEY_FILE, ZoneConfig, ZoneError};
use super::files::{ensure_admin, tighten_files, touch_private};
use super::seams::{AgentDirectory, AppsLogs, HubDirectory, ServicesThroughAgents};
use crate::agents::{AgentBinary, AgentBootstrap, AgentHub};
use crate::api::{self, ApiState};
use crate::apps::Apps;
use crate::backend::Backends;
use crate::hub::{Hub, HubOptions};
use crate::mesh::{MeshChange, MeshHandle, MeshSignal};
use crate::model::{Timestamp, TokenSecret};
use crate::reconcile::Reconciler;
use crate::store::{SealingKey, Store, sqlite_url};
use crate::web::{ApiInProcess, StoreForEdge};

/// Refuses a plain zone (no TLS) that would listen anywhere but on loopback.
pub fn check_plain_on_loopback(config: &ZoneConfig) -> Result<(), ZoneError> {
    if config.tls.plain {
        for (what, addr) in [
            ("API", Some(config.http_addr)),
            ("provider endpoint", Some(config.grpc_addr)),
            ("API for nodes", config.node_http_addr),
        ]
        .into_iter()
        .filter_map(|(what, addr)| Some((what, addr?)))
        {
            if !addr.ip().is_loopback() {
                return Err(ZoneError::PlainOffLoopback { what, addr });
            }
        }
    }
    Ok(())
}

/// The zone's CA in the data dir, made on first start; `None` for a plain zone.
pub fn load_ca(config: &ZoneConfig) -> Result<Option<Arc<ZoneCa>>, ZoneError> {
    if config.tls.plain {
        return Ok(None);
    }
    let data_dir = &config.data_dir;
    let (ca, is_new) =
        ZoneCa::load_or_create(&data_dir.join(CA_CERT_FILE), &data_dir.join(CA_KEY_FILE))?;
    if is_new {
        tracing::info!(fingerprint = %ca.fingerprint(), "the zone's CA was created; clients pin {CA_CERT_FILE}");
    }
    Ok(Some(Arc::new(ca)))
}

/// The store, open with its sealing key, and what lives in it before anything serves: the
/// access edge's signing keys, a mesh range that fits the one in use, the first operator.
pub struct StorePart {
    pub store: Store,
    /// The same store, as the web layer sees it.
    pub edge_store: Arc<dyn EdgeStore>,
    pub access_keys: Arc<AccessKeys>,
    pub admin_token: TokenSecret,
    /// Whether this start made the admin token (the first start, or a renewal).
    pub admin_token_is_new: bool,
}

impl std::fmt::Debug for StorePart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StorePart")
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

impl StorePart {
    /// Opens the store of `config` (SQLite in the data dir unless a PostgreSQL URL is
    /// given), seals what it kept in clear, and readies the rest; closes it again on
    /// failure.
    pub async fn open(config: &ZoneConfig) -> Result<StorePart, ZoneError> {
        let data_dir = &config.data_dir;
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
        match StorePart::ready(store.clone(), key, config).await {
            Ok(part) => Ok(part),
            Err(e) => {
                store.close().await;
                Err(e)
            }
        }
    }

    async fn ready(
        store: Store,
        key: SealingKey,
        config: &ZoneConfig,
    ) -> Result<StorePart, ZoneError> {
        let resealed = store.set_sealing_key(key).await.map_err(ZoneError::Store)?;
        if resealed > 0 {
            tracing::info!(resealed, "sensitive params stored in clear were sealed");
        }
        tighten_files(&config.data_dir)?;
        let edge_store: Arc<dyn EdgeStore> = Arc::new(StoreForEdge(store.clone()));
        let access_keys = AccessKeys::load(edge_store.clone(), Timestamp::now())
            .await
            .map_err(ZoneError::AccessKeys)?;
        crate::mesh::check_range(&store, &config.mesh)
            .await
            .map_err(ZoneError::MeshRange)?;
        let (admin_token, admin_token_is_new) = ensure_admin(&store, &config.data_dir).await?;
        Ok(StorePart {
            store,
            edge_store,
            access_keys: Arc::new(access_keys),
            admin_token,
            admin_token_is_new,
        })
    }
}

/// The zone's listeners, all bound before any serves, so a port in use fails the start
/// before anything runs.
#[derive(Debug)]
pub struct Listeners {
    pub http: (TcpListener, SocketAddr),
    pub grpc: (TcpListener, SocketAddr),
    /// The API's second listener, for nodes (`ZoneConfig::node_http_addr`).
    pub node_http: Option<(TcpListener, SocketAddr)>,
    /// The access edge's; `None` when it runs none (or the zone is plain).
    pub edge: Option<(TcpListener, SocketAddr)>,
}

impl Listeners {
    /// Binds the addresses of `config`; the edge only with TLS (`tls`).
    pub async fn bind(config: &ZoneConfig, tls: bool) -> Result<Listeners, ZoneError> {
        let http = bind("HTTP API", config.http_addr).await?;
        let grpc = bind("provider gRPC endpoint", config.grpc_addr).await?;
        let node_http = match config.node_http_addr {
            Some(addr) => Some(bind("HTTP API for nodes", addr).await?),
            None => None,
        };
        let edge = match (&config.edge, tls) {
            (Some(edge), true) => Some(bind("access edge", edge.addr).await?),
            (Some(_), false) => {
                tracing::info!("the access edge needs TLS: a plain zone runs none");
                None
            }
            (None, _) => None,
        };
        Ok(Listeners {
            http,
            grpc,
            node_http,
            edge,
        })
    }
}

/// TLS for the API and the provider and agent endpoint, from one certificate of the zone's
/// CA for both listeners' names, kept renewed.
#[derive(Debug, Default)]
pub struct ListenerTls {
    pub api: Option<Arc<orc_tls::rustls::ServerConfig>>,
    /// Agents present node certificates here; providers present none.
    pub grpc: Option<Arc<orc_tls::rustls::ServerConfig>>,
    pub renew: Option<JoinHandle<()>>,
}

impl ListenerTls {
    /// Issues the listeners' certificate (none for a plain zone) and starts its renewal.
    pub fn issue(
        config: &ZoneConfig,
        ca: Option<&Arc<ZoneCa>>,
        addrs: &[SocketAddr],
    ) -> Result<ListenerTls, ZoneError> {
        let Some(ca) = ca else {
            return Ok(ListenerTls::default());
        };
        let mut extra = config.tls.names.clone();
        // Nodes check the name they dial.
        extra.extend(config.agent_url.as_deref().and_then(url_host));
        let names = server_names(&extra, addrs);
        let cert = orc_tls::RenewingCert::new(ca.issue_server(&names, config.tls.cert_lifetime)?)?;
        let renew = tokio::spawn(cert.clone().keep_renewed(
            ca.clone(),
            names,
            config.tls.cert_lifetime,
        ));
        Ok(ListenerTls {
            api: Some(orc_tls::server_config(cert.clone(), orc_tls::ALPN_HTTP)),
            grpc: Some(orc_tls::server_config_with_clients(
                cert,
                orc_tls::ALPN_H2,
                ca.roots(),
            )),
            renew: Some(renew),
        })
    }
}

/// The provider hub and the agent hub, serving together on the gRPC listener.
#[derive(Debug)]
pub struct Hubs {
    pub hub: Hub,
    pub agents: AgentHub,
    /// What wakes the mesh reconciler when the hub sees a change.
    pub mesh_signal: MeshSignal,
    pub task: JoinHandle<std::io::Result<()>>,
}

/// Where nodes pull images and the key of their grants.
#[derive(Debug)]
pub struct RegistryAccess {
    /// `https://zone:7070`, as nodes reach the API.
    pub url: String,
    /// Signs the grants (the API checks them with the same key).
    pub key: Arc<orc_zone_model::oci::PullKey>,
}

impl Hubs {
    /// Starts both hubs over `store` and serves them on `listener` until `stopped`.
    pub fn start(
        config: &ZoneConfig,
        store: &Store,
        ca: Option<Arc<ZoneCa>>,
        listener: TcpListener,
        tls: Option<Arc<orc_tls::rustls::ServerConfig>>,
        stopped: watch::Receiver<bool>,
        registry: RegistryAccess,
    ) -> Hubs {
        let mesh_signal = MeshSignal::default();
        let hub = Hub::new(
            store.clone(),
            HubOptions {
                mesh: Some(mesh_signal.clone()),
                ..config.hub.clone()
            },
        );
        let agent_options = crate::agents::AgentHubOptions {
            registry_url: config.agents.registry_url.clone().or(Some(registry.url)),
            pull_key: registry.key,
            workloads: config.mesh.workloads,
            ..config.agents.clone()
        };
        let agents = AgentHub::new(store.clone(), ca, agent_options);
        let routes = tonic::service::Routes::new(hub.grpc_service())
            .add_service(agents.grpc_service())
            .prepare();
        let options = orc_tls::ServeOptions {
            what: "provider and agent endpoint",
            http2_only: true,
            ..config.limits.serve_options(tls)
        };
        let task = tokio::spawn(orc_tls::serve(
            listener,
            routes,
            options,
            wait_for_stop(stopped),
        ));
        Hubs {
            hub,
            agents,
            mesh_signal,
            task,
        }
    }

    /// Stops both hubs (after a failed start).
    pub fn shutdown(&self) {
        self.hub.shutdown();
        self.agents.shutdown();
    }
}

/// What nodes are given to join: the agent endpoint they dial, and the `orc` binary the API
/// serves to their bootstraps, if the zone serves one.
#[derive(Debug)]
pub struct AgentSupply {
    pub endpoint: String,
    pub binary: Option<(api::nodes::ServedBinary, AgentBinary)>,
}

impl AgentSupply {
    /// The endpoint and binary of `config`, for the API as nodes reach it (`nodes_api`,
    /// from [`AgentSupply::nodes_api`]) and the gRPC listener at `grpc_addr`.
    pub async fn new(
        config: &ZoneConfig,
        scheme: &str,
        nodes_api: &str,
        grpc_addr: SocketAddr,
    ) -> Result<AgentSupply, ZoneError> {
        let endpoint = config
            .agent_url
            .clone()
            .unwrap_or_else(|| format!("{scheme}://{}", dialable(grpc_addr)));
        let binary = match &config.agent_binary {
            Some(path) => Some(served_binary(path, format!("{nodes_api}/api/agent/orc")).await?),
            None => None,
        };
        Ok(AgentSupply { endpoint, binary })
    }

    /// The API's URL as nodes reach it, where they download the agent and pull images:
    /// the host of `--agent-url` with the API's port; else the API's listener for nodes
    /// (`node_http`); else the API's own (`http_addr`).
    pub fn nodes_api(
        config: &ZoneConfig,
        scheme: &str,
        http_addr: SocketAddr,
        node_http: Option<SocketAddr>,
    ) -> String {
        let at = match (config.agent_url.as_deref().and_then(url_host), node_http) {
            (Some(host), _) => join_host_port(&host, http_addr.port()),
            (None, Some(addr)) => dialable(addr).to_string(),
            (None, None) => dialable(http_addr).to_string(),
        };
        format!("{scheme}://{at}")
    }

    /// The bootstrap a deploy hands a node, with a zone of `ca`.
    pub fn bootstrap(&self, ca: &ZoneCa) -> AgentBootstrap {
        AgentBootstrap {
            endpoint: self.endpoint.clone(),
            ca_pem: ca.cert_pem().to_string(),
            ca_fingerprint: ca.fingerprint(),
            binary: self.binary.as_ref().map(|(_, b)| b.clone()),
            ttl: orc_zone_model::JoinTtl::default(),
        }
    }
}

/// Everything the API reaches through its seams.
#[derive(Debug)]
pub struct ApiParts<'a> {
    pub store: &'a Store,
    pub backends: Backends,
    pub hubs: &'a Hubs,
    pub apps: &'a Apps,
    pub mesh: &'a MeshHandle,
    pub reconciler: Reconciler,
    /// Wakes the rollout controller.
    pub rollouts: crate::rollouts::RolloutSignal,
    pub access_keys: &'a Arc<AccessKeys>,
    pub agents: &'a AgentSupply,
    /// Checks the registry pull grants the agent hub signs.
    pub pull_key: Arc<orc_zone_model::oci::PullKey>,
    pub clock: SharedClock,
}

/// The API's state over the zone's parts (edge links come once the edge runs).
pub fn api_state(config: &ZoneConfig, parts: ApiParts<'_>) -> ApiState {
    let reconciler = parts.reconciler;
    let rollouts = parts.rollouts;
    let clock = parts.clock;
    let state = ApiState::new(parts.store.clone())
        .with_backends(parts.backends)
        .with_directory(Arc::new(HubDirectory(parts.hubs.hub.clone())))
        .with_logs(Arc::new(AppsLogs(parts.apps.clone())))
        .with_agents(Arc::new(AgentDirectory {
            hub: parts.hubs.agents.clone(),
            endpoint: parts.agents.endpoint.clone(),
        }))
        .with_apps(config.apps.clone())
        .with_registry(parts.apps.blobs().clone())
        .with_pull_key(parts.pull_key)
        .with_mesh(config.mesh.clone(), parts.mesh.signal())
        .with_access_keys(parts.access_keys.clone())
        .with_waker({
            let mesh = parts.mesh.signal();
            move || {
                reconciler.wake();
                rollouts.wake();
                mesh.changed(MeshChange::Everything);
            }
        })
        .with_clock(move || clock.now());
    match &parts.agents.binary {
        Some((served, _)) => state.with_agent_binary(served.clone()),
        None => state,
    }
}

/// The access edge of a running zone.
#[derive(Debug)]
pub struct RunningEdge {
    pub addr: SocketAddr,
    pub url: String,
    /// What the API says of the edge.
    pub links: api::EdgeLinks,
    task: JoinHandle<std::io::Result<()>>,
    /// Deletes old sessions hourly.
    sweeper: JoinHandle<()>,
}

impl RunningEdge {
    /// Starts the access edge on `listener`, with the console over the API of `state`,
    /// signing as `issuer`, until `stopped`.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        config: &ZoneConfig,
        edge_config: &EdgeConfig,
        (listener, addr): (TcpListener, SocketAddr),
        ca: &Arc<ZoneCa>,
        store: &StorePart,
        apps: &Apps,
        agents: &AgentHub,
        state: &ApiState,
        issuer: String,
        stopped: watch::Receiver<bool>,
    ) -> RunningEdge {
        let certs = Arc::new(EdgeCerts::new(
            ca.clone(),
            &edge_config.domain,
            config.tls.cert_lifetime,
        ));
        let edge_state = EdgeState::new(
            store.edge_store.clone(),
            store.access_keys.clone(),
            Arc::new(apps.clone()),
            issuer,
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
        let services = Arc::new(ServicesThroughAgents {
            store: store.store.clone(),
            agents: agents.clone(),
        });
        let task = tokio::spawn(orc_web::edge::serve(
            listener,
            edge_state.with_console(console).with_services(services),
            config.limits.serve_options(Some(certs.server_config())),
            wait_for_stop(stopped),
        ));
        let sweeper = tokio::spawn(orc_web::edge::sweep_sessions(
            store.edge_store.clone(),
            Duration::from_secs(3600),
        ));
        RunningEdge {
            addr,
            url,
            links,
            task,
            sweeper,
        }
    }

    /// Stops the edge, letting requests in flight finish.
    pub async fn shutdown(self) {
        self.sweeper.abort();
        match self.task.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "the access edge ended with an error"),
            Err(e) => tracing::warn!(error = %e, "the access edge task failed"),
        }
    }
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
fn server_names(extra: &[String], addrs: &[SocketAddr]) -> Vec<String> {
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
pub(super) fn dialable(addr: SocketAddr) -> SocketAddr {
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

pub(super) async fn wait_for_stop(mut stopped: watch::Receiver<bool>) {
    // An error means the sender is gone, which also means stop.
    let _ = stopped.wait_for(|stop| *stop).await;
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
