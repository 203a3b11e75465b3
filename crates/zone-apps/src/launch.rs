//! Launching one slot: the pool's package resolved to a binary, its params planned into
//! files and variables, its http ports and its zone token.

use std::fs::DirBuilder;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::fs::DirBuilderExt as _;
use std::sync::{Arc, Mutex};

use orc_zone_model::registry::{Digest, Platform};
use orc_zone_model::{Name, Node, NodeId, Pool, PoolId, Timestamp, TokenSecret, sys_org_id};
use orc_zone_store::StoreError;

use crate::blobs::InstallFor;
use crate::config::{AppBinary, ResolveError};
use crate::slot::SlotStatus;

use crate::params::{FileText, ParamFile, plan_params};
use crate::slot::{Launch, SlotContext, SlotHandle};

use crate::Apps;
use crate::backend::parse_node;
use crate::error::LaunchError;

/// How long an app pool's service credential is valid: 30 days. A new one is made at every
/// zone start (revoking the old), so it outlives no zone process by long.
const SERVICE_TOKEN_DAYS: i64 = 30;

impl Apps {
    pub(crate) async fn start_node(&self, node: &NodeId) -> Result<NodeId, LaunchError> {
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

    pub(crate) async fn start_handle(
        &self,
        pool: &Pool,
        node: &Node,
    ) -> Result<SlotHandle, LaunchError> {
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

    pub(crate) fn slot_log(&self, pool: &PoolId, slot: u32) -> Arc<crate::logs::SlotLog> {
        let path = self.log_file(pool, slot);
        let capacity = self.inner.config.options.log_lines;
        let make = || {
            if let Some(dir) = path.parent() {
                let _ = DirBuilder::new().recursive(true).mode(0o700).create(dir);
            }
            Arc::new(crate::logs::SlotLog::new(slot, capacity, Some(&path)))
        };
        match self.inner.logs.lock() {
            Ok(mut map) => map.entry((pool.clone(), slot)).or_insert_with(make).clone(),
            Err(_) => make(),
        }
    }

    /// The node and its pool, if the pool is on `core`.
    pub(crate) async fn core_node(&self, node_id: &NodeId) -> Result<(Pool, Node), LaunchError> {
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
    pub(crate) async fn launch_for(
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
        let identity = crate::run_as::pool_identity(self.inner.config.run_as, &pool_dir);
        let install = identity.as_ref().map(|identity| InstallFor {
            runtime_root: self.inner.config.runtime_root.clone(),
            dir: crate::run_as::pool_bin_dir(&self.inner.config.runtime_root, &pool.id, &pool_dir),
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
    pub(crate) async fn registry_binary(
        &self,
        package: &str,
        digest: &Digest,
        install: Option<InstallFor>,
    ) -> Result<AppBinary, ResolveError> {
        let reference = crate::config::parse_package(package)?;
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
    pub(crate) async fn pool_token(&self, pool: &Pool) -> Result<TokenSecret, LaunchError> {
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
}

/// The variable that hands a slot the address of its http endpoint `name`:
/// `ORC_HTTP_<NAME>_ADDR`, upper case, `-` as `_`.
pub fn http_env(name: &str) -> String {
    format!(
        "ORC_HTTP_{}_ADDR",
        name.to_ascii_uppercase().replace('-', "_")
    )
}
