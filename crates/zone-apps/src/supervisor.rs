//! The supervisor: starting and stopping the `core` provider, keeping the held slots in step
//! with the store, rolling replacements, and what it shows of its slots, logs and ports.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::DirBuilder;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::watch;
use tokio::task::JoinSet;

use orc_zone_model::{NodeId, NodeState, Pool, PoolId, Provider};
use orc_zone_store::{Store, StoreError};

use crate::blobs::Blobs;
use crate::config::AppsConfig;
use crate::logs::{Level, LogLine};

use crate::policy::{Registered, RolloutStep, SlotView, next_rollout_step};
use crate::slot::SlotHandle;

use crate::error::{AppsError, LaunchError};
use crate::rows::{ensure_apps_user, ensure_core_provider, retire_shared_powers};
use crate::{Apps, Inner, Registrations, SlotInfo, ZoneEndpoint};

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
    pub(crate) fn attached(&self, pool: &PoolId) -> Option<BTreeMap<u32, bool>> {
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
        let sources: Vec<Arc<crate::logs::SlotLog>> = match self.inner.logs.lock() {
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
    pub(crate) fn http_port(
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
    pub(crate) fn release_http_ports(&self, node: &NodeId) {
        self.inner
            .http_ports
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|(_, _, n, _), _| n != node);
    }

    /// One comparison of held slots with the store.
    pub(crate) async fn supervise_once(&self) -> Result<(), StoreError> {
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

pub(crate) async fn supervise_loop(apps: Apps) {
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
