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
//! - `zone-url` — the API's URL, rewritten at every start, so the CLI finds a local zone.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::api::views::ReplicaView;
use crate::api::{self, ApiState, LogLineView, LogSource, LogsFuture, ProviderDirectory};
use crate::apps::{Apps, AppsConfig, AppsError};
use crate::backend::Backends;
use crate::hub::{Hub, HubOptions};
use crate::model::{Name, Pool, Provider, Role, TokenSecret, sys_org_id};
use crate::reconcile::{ReconcileOptions, ReconcilerHandle, Reconcilers, SharedClock, SystemClock};
use crate::store::{SealingKey, Store, StoreError, sqlite_url};

/// Default address of the HTTP API.
pub const DEFAULT_HTTP_ADDR: &str = "127.0.0.1:7070";
/// Default address of the providers' gRPC endpoint.
pub const DEFAULT_GRPC_ADDR: &str = "127.0.0.1:7400";
/// Name of the first operator the zone creates.
pub const ADMIN_USER: &str = "admin";
/// File in the data dir holding the admin token.
pub const ADMIN_TOKEN_FILE: &str = "admin-token";
/// File in the data dir holding the API's URL.
pub const ZONE_URL_FILE: &str = "zone-url";
/// File in the data dir holding the sealing key, unless the config names another.
pub const SEALING_KEY_FILE: &str = "sealing-key";

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
        }
    }

    /// A config for tests: loopback, free ports.
    pub fn ephemeral(data_dir: impl Into<PathBuf>) -> Self {
        ZoneConfig {
            http_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            grpc_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
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
    /// The sealing key could not be read or made.
    #[error(transparent)]
    SealingKey(#[from] orc_zone_store::SealError),
    /// The store could not be opened or prepared.
    #[error("the store could not be opened")]
    Store(#[source] StoreError),
    /// The `core` provider (apps supervisor) could not start.
    #[error("the apps supervisor could not start")]
    Apps(#[source] AppsError),
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
    data_dir: PathBuf,
    http_addr: SocketAddr,
    grpc_addr: SocketAddr,
    admin_token: TokenSecret,
    admin_token_is_new: bool,
    hub: Hub,
    apps: Apps,
    reconcilers: ReconcilerHandle,
    stop: watch::Sender<bool>,
    http_task: JoinHandle<std::io::Result<()>>,
    grpc_task: JoinHandle<Result<(), tonic::transport::Error>>,
}

impl Zone {
    /// Opens the store, makes sure the first operator exists, and starts every part.
    pub async fn start(config: ZoneConfig) -> Result<Zone, ZoneError> {
        let data_dir = config.data_dir.clone();
        prepare_data_dir(&data_dir)?;
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
        let (admin_token, admin_token_is_new) = ensure_admin(&store, &data_dir).await?;

        let (http, http_addr) = bind("HTTP API", config.http_addr).await?;
        let (grpc, grpc_addr) = bind("provider gRPC endpoint", config.grpc_addr).await?;
        let (stop, stopped) = watch::channel(false);

        let clock: SharedClock = Arc::new(SystemClock);
        let hub = Hub::new(store.clone(), config.hub.clone());
        let grpc_task = {
            let hub = hub.clone();
            let stopped = stopped.clone();
            tokio::spawn(async move { hub.serve(grpc, wait_for_stop(stopped)).await })
        };
        let apps = match Apps::start(
            store.clone(),
            &data_dir,
            &format!("http://{}", dialable(grpc_addr)),
            config.apps.clone(),
        )
        .await
        {
            Ok(apps) => apps,
            Err(e) => {
                let _ = stop.send(true);
                hub.shutdown();
                store.close().await;
                return Err(ZoneError::Apps(e));
            }
        };
        let backends = Backends::new(hub.clone(), apps.clone());
        let reconcilers = Reconcilers::spawn(
            store.clone(),
            backends.clone(),
            clock.clone(),
            config.reconcile.clone(),
        );
        let reconciler = reconcilers.reconciler().clone();
        let state = ApiState::new(store.clone())
            .with_backends(backends)
            .with_directory(Arc::new(HubDirectory(hub.clone())))
            .with_logs(Arc::new(AppsLogs(apps.clone())))
            .with_apps(config.apps.clone())
            .with_waker(move || reconciler.wake())
            .with_clock(move || clock.now());
        let http_task = tokio::spawn(api::serve(http, state, wait_for_stop(stopped)));

        let url_file = data_dir.join(ZONE_URL_FILE);
        write_private_file(&url_file, &format!("http://{}", dialable(http_addr))).map_err(
            |source| ZoneError::DataDir {
                path: url_file,
                source,
            },
        )?;
        tracing::info!(%http_addr, %grpc_addr, "zone started");

        Ok(Zone {
            store,
            data_dir,
            http_addr,
            grpc_addr,
            admin_token,
            admin_token_is_new,
            hub,
            apps,
            reconcilers,
            stop,
            http_task,
            grpc_task,
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

    /// The API's base URL, `http://ADDR` (loopback when it listens on every address).
    pub fn url(&self) -> String {
        format!("http://{}", dialable(self.http_addr))
    }

    /// Where providers dial in.
    pub fn grpc_addr(&self) -> SocketAddr {
        self.grpc_addr
    }

    /// The gRPC URL providers dial, `http://ADDR`.
    pub fn grpc_url(&self) -> String {
        format!("http://{}", dialable(self.grpc_addr))
    }

    /// The provider hub (connected replicas, catalogs).
    pub fn hub(&self) -> &Hub {
        &self.hub
    }

    /// The `core` provider (app slots and their logs).
    pub fn apps(&self) -> &Apps {
        &self.apps
    }

    /// Asks the reconcilers for a pass now.
    pub fn wake(&self) {
        self.reconcilers.wake();
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
        match self.http_task.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "the API server ended with an error"),
            Err(e) => tracing::warn!(error = %e, "the API server task failed"),
        }
        self.reconcilers.shutdown().await;
        self.apps.shutdown().await;
        self.hub.shutdown();
        match self.grpc_task.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "the gRPC server ended with an error"),
            Err(e) => tracing::warn!(error = %e, "the gRPC server task failed"),
        }
        self.store.close().await;
    }
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

/// Makes sure user `admin` exists with an owner role in org `sys` and a token in
/// `<data_dir>/admin-token`. Returns the token and whether it was created now.
async fn ensure_admin(store: &Store, data_dir: &Path) -> Result<(TokenSecret, bool), ZoneError> {
    let path = data_dir.join(ADMIN_TOKEN_FILE);
    let now = crate::model::Timestamp::now();
    let name: Name = ADMIN_USER.parse().map_err(|e: crate::model::ModelError| {
        ZoneError::Store(StoreError::Invalid {
            kind: crate::store::Kind::User,
            id: ADMIN_USER.to_string(),
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
        if valid.is_some_and(|t| t.user_id == user.id) {
            return Ok((secret, false));
        }
        tracing::warn!(path = %path.display(), "the admin token file holds no valid token; writing a new one");
    }
    let (_, secret) = store
        .create_token(&user.id, "admin (created at zone start)", None, now)
        .await
        .map_err(ZoneError::Store)?;
    write_private_file(&path, secret.expose()).map_err(|source| ZoneError::DataDir {
        path: path.clone(),
        source,
    })?;
    Ok((secret, true))
}

fn write_private_file(path: &Path, text: &str) -> std::io::Result<()> {
    let mut file = open_private(path, true)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    writeln!(file, "{text}")?;
    file.sync_all()
}
