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

mod config;
mod files;
pub mod parts;
mod seams;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use orc_common::time::{SharedClock, SystemClock};
use orc_tls::ZoneCa;
use orc_web::access_keys::AccessKeys;
use orc_zone_api_types::data_dir::{CA_CERT_FILE, ZONE_URL_FILE, write_private_file};
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use self::config::*;
pub use self::files::prepare_data_dir;
use self::parts::{
    AgentSupply, ApiParts, Hubs, ListenerTls, Listeners, RegistryAccess, RunningEdge, StorePart,
    api_state, check_plain_on_loopback, dialable, load_ca, wait_for_stop,
};
use self::seams::HubRegistrations;
use crate::agents::AgentHub;
use crate::api;
use crate::apps::{Apps, ZoneEndpoint};
use crate::backend::Backends;
use crate::certificates::Certificates;
use crate::certificates::client::Directory;
use crate::hub::Hub;
use crate::mesh::MeshHandle;
use crate::model::TokenSecret;
use crate::reconcile::{ReconcilerHandle, Reconcilers};
use crate::rollouts::Rollouts;
use crate::store::Store;

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
    /// The API's listener for nodes, when it has one.
    node_http_task: Option<JoinHandle<std::io::Result<()>>>,
    grpc_task: JoinHandle<std::io::Result<()>>,
    edge: Option<RunningEdge>,
    web_url: String,
    ca: Option<Arc<ZoneCa>>,
    renew_task: Option<JoinHandle<()>>,
    /// Removes unused registry packages and binaries hourly.
    registry_sweeper: JoinHandle<()>,
    /// Rolls apps out on the nodes.
    rollouts: JoinHandle<()>,
    /// Obtains and renews certificates for apps' domains; `None` without ACME.
    certificates: Option<JoinHandle<()>>,
}

impl Zone {
    /// Opens the store, makes sure the first operator exists, and starts every part, one
    /// builder each ([`parts`]): the store, the listeners, the hubs, the apps supervisor,
    /// the mesh and the reconcilers, the API, the edge.
    pub async fn start(config: ZoneConfig) -> Result<Zone, ZoneError> {
        check_plain_on_loopback(&config)?;
        prepare_data_dir(&config.data_dir)?;
        let ca = load_ca(&config)?;
        let store = StorePart::open(&config).await?;
        match Zone::start_parts(config, ca, &store).await {
            Ok(started) => Ok(started(store)),
            Err(e) => {
                store.store.close().await;
                Err(e)
            }
        }
    }

    /// Every part over the open store; what is left to finish the [`Zone`] is the store
    /// itself, handed over last so a failure can still close it.
    async fn start_parts(
        config: ZoneConfig,
        ca: Option<Arc<ZoneCa>>,
        store: &StorePart,
    ) -> Result<impl FnOnce(StorePart) -> Zone + use<>, ZoneError> {
        // A directory whose CA file is unusable fails the start before anything runs.
        let acme = match &config.acme {
            Some(acme) => Some((
                Directory::new(
                    &acme.directory,
                    acme.contact.clone(),
                    acme.ca_pem.as_deref(),
                )
                .map_err(ZoneError::Acme)?,
                acme.clone(),
            )),
            None => None,
        };
        let listeners = Listeners::bind(&config, ca.is_some()).await?;
        let (http, http_addr) = listeners.http;
        let (grpc, grpc_addr) = listeners.grpc;
        let node_http_addr = listeners.node_http.as_ref().map(|(_, addr)| *addr);
        let scheme = if ca.is_some() { "https" } else { "http" };
        let tls = ListenerTls::issue(
            &config,
            ca.as_ref(),
            &[Some(http_addr), Some(grpc_addr), node_http_addr]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>(),
        )?;
        let nodes_api = AgentSupply::nodes_api(&config, scheme, http_addr, node_http_addr);
        let (stop, stopped) = watch::channel(false);
        // Nodes pull images with grants the agent hub signs and the API checks.
        let pull_key = Arc::new(orc_zone_model::oci::PullKey::generate());
        let hubs = Hubs::start(
            &config,
            &store.store,
            ca.clone(),
            grpc,
            tls.grpc,
            stopped.clone(),
            RegistryAccess {
                url: nodes_api.clone(),
                key: pull_key.clone(),
            },
        );
        let endpoint = ZoneEndpoint {
            url: format!("{scheme}://{}", dialable(grpc_addr)),
            ca_pem: ca.as_ref().map(|ca| ca.cert_pem().to_string()),
        };
        let apps = match Apps::start(
            store.store.clone(),
            &config.data_dir,
            endpoint,
            config.apps.clone(),
        )
        .await
        {
            Ok(apps) => apps,
            Err(e) => {
                let _ = stop.send(true);
                hubs.shutdown();
                return Err(ZoneError::Apps(e));
            }
        };
        apps.watch_registrations(Arc::new(HubRegistrations(hubs.hub.clone())));
        let agents = AgentSupply::new(&config, scheme, &nodes_api, grpc_addr).await?;

        let clock: SharedClock = Arc::new(SystemClock);
        let mesh = MeshHandle::spawn(
            store.store.clone(),
            hubs.agents.clone(),
            clock.clone(),
            config.mesh.clone(),
            hubs.mesh_signal.clone(),
        );
        let mut reconcile = config.reconcile.clone();
        reconcile.bootstrap = ca.as_ref().map(|ca| Arc::new(agents.bootstrap(ca)));
        reconcile.mesh_wake = Some(mesh.signal());
        let backends = Backends::new(hubs.hub.clone(), apps.clone());
        let reconcilers = Reconcilers::spawn(
            store.store.clone(),
            backends.clone(),
            clock.clone(),
            reconcile,
        );
        let rollout_signal = hubs.agents.rollout_signal();
        let rollouts = Rollouts::new(
            store.store.clone(),
            clock.clone(),
            rollout_signal.clone(),
            hubs.agents.assignment_signal(),
            config.replica_drain,
        )
        .spawn(stopped.clone());
        let certificates = acme.map(|(directory, acme)| {
            Certificates::new(
                store.store.clone(),
                clock.clone(),
                directory,
                &acme,
                hubs.agents.clone(),
            )
            .spawn(stopped.clone())
        });
        let state = api_state(
            &config,
            ApiParts {
                store: &store.store,
                backends,
                hubs: &hubs,
                apps: &apps,
                mesh: &mesh,
                reconciler: reconcilers.reconciler().clone(),
                rollouts: rollout_signal,
                access_keys: &store.access_keys,
                agents: &agents,
                pull_key,
                clock,
            },
        );

        let zone_url = format!("{scheme}://{}", dialable(http_addr));
        let web_url = config
            .web_url
            .as_deref()
            .map_or_else(|| zone_url.clone(), |u| u.trim_end_matches('/').to_string());
        let edge = match (listeners.edge, &config.edge, &ca) {
            (Some(listener), Some(edge_config), Some(ca)) => Some(RunningEdge::start(
                &config,
                edge_config,
                listener,
                ca,
                store,
                &apps,
                &hubs.agents,
                &state,
                web_url.clone(),
                stopped.clone(),
            )),
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
        // Nodes that cannot reach the API's address reach the same API at a second one.
        let node_http_task = listeners.node_http.map(|(listener, _)| {
            tokio::spawn(api::serve(
                listener,
                state.clone(),
                config.limits.serve_options(tls.api.clone()),
                config.limits.api.clone(),
                wait_for_stop(stopped.clone()),
            ))
        });
        let http_task = tokio::spawn(api::serve(
            http,
            state,
            config.limits.serve_options(tls.api),
            config.limits.api.clone(),
            wait_for_stop(stopped),
        ));

        let url_file = config.data_dir.join(ZONE_URL_FILE);
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
        Ok(move |store: StorePart| Zone {
            store: store.store,
            access_keys: store.access_keys,
            data_dir: config.data_dir,
            http_addr,
            grpc_addr,
            admin_token: store.admin_token,
            admin_token_is_new: store.admin_token_is_new,
            hub: hubs.hub,
            agents: hubs.agents,
            apps,
            reconcilers,
            mesh,
            stop,
            http_task,
            node_http_task,
            grpc_task: hubs.task,
            edge,
            web_url,
            ca,
            renew_task: tls.renew,
            registry_sweeper,
            rollouts,
            certificates,
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
        for task in std::iter::once(self.http_task).chain(self.node_http_task) {
            match task.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, "the API server ended with an error"),
                Err(e) => tracing::warn!(error = %e, "the API server task failed"),
            }
        }
        if let Some(edge) = self.edge {
            edge.shutdown().await;
        }
        self.reconcilers.shutdown().await;
        let _ = self.rollouts.await;
        if let Some(certificates) = self.certificates {
            certificates.abort();
            let _ = certificates.await;
        }
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
