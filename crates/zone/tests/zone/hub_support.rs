//! Shared setup of the hub and reconcile tests: a store on SQLite in a temp dir, a hub on a
//! loopback port, fake provider replicas under the real runner (each in its own runtime, so
//! killing one stops its work too, as SIGKILL would), and reconcilers on a manual clock.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use orc_common::time::ManualClock;
use orc_provider_sdk::fake::{FakeCloud, FakeConfig, FakeProvider};
use orc_provider_sdk::{GrpcConnector, ProviderRunner, RunnerOptions, ZoneCredentials};
use orc_testkit::eventually;
use orc_zone::backend::{BackendError, Backends, NodeBackend};
use orc_zone::hub::{Hub, HubOptions};
use orc_zone::model::{
    Name, NewPool, Node, NodeState, PoolSpec, Project, Provider, Role, Timestamp,
};
use orc_zone::reconcile::{ReconcileOptions, Reconciler};
use orc_zone::store::Store;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// 2026-03-01T00:00:00Z, a fixed start for manual clocks.
pub const START: Timestamp = Timestamp(1_772_323_200_000);

/// A zone's store, tenant and credentials.
pub struct Tenant {
    pub store: Store,
    pub project: Project,
    pub token: String,
    pub path: PathBuf,
}

/// Opens a fresh store in `dir` with org `acme`, project `acme/web` and an owner's token.
pub async fn tenant(dir: &tempfile::TempDir) -> Tenant {
    let path = dir.path().join("zone.db");
    let store = Store::open_sqlite_file(&path).await.expect("store opens");
    let now = START;
    let org = store.create_org(&name("acme"), now).await.expect("org");
    let project = store
        .create_project(&org.id, &name("web"), now)
        .await
        .expect("project");
    let user = store.create_user(&name("alice"), now).await.expect("user");
    store
        .add_membership(&user.id, &org.id, Some(&project.id), Role::Owner, now)
        .await
        .expect("membership");
    let (_, secret) = store
        .create_token(&user.id, "provider", None, None, now)
        .await
        .expect("token");
    Tenant {
        store,
        project,
        token: secret.expose().to_string(),
        path,
    }
}

pub fn name(text: &str) -> Name {
    text.parse().expect("valid name")
}

/// A hub serving on a loopback port.
pub struct HubServer {
    pub hub: Hub,
    pub address: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl HubServer {
    pub async fn start(store: &Store, clock: &ManualClock, at: Option<SocketAddr>) -> HubServer {
        let options = HubOptions {
            clock: Arc::new(clock.clone()),
            ..HubOptions::default()
        };
        let hub = Hub::new(store.clone(), options);
        let listener =
            TcpListener::bind(at.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0))))
                .await
                .expect("bind loopback");
        let address = listener.local_addr().expect("address");
        let (stop, stopped) = oneshot::channel::<()>();
        let serving = hub.clone();
        let task = tokio::spawn(async move {
            let _ = serving
                .serve(listener, async {
                    let _ = stopped.await;
                })
                .await;
        });
        HubServer {
            hub,
            address,
            stop: Some(stop),
            task: Some(task),
        }
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Stops serving; open streams are cut.
    pub async fn stop(mut self) {
        self.hub.shutdown();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }
}

/// Dials the hub with the zone token and project in the stream's metadata, as a provider
/// process does.
pub fn auth_connector(endpoint: &str, token: &str, project: &str) -> GrpcConnector {
    let credentials = ZoneCredentials::new(token, project).expect("printable credentials");
    GrpcConnector::new(endpoint, Duration::from_secs(2), None)
        .expect("endpoint")
        .with_credentials(credentials)
}

/// A provider replica running in a runtime of its own.
pub struct Replica {
    pub provider: Arc<FakeProvider>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Replica {
    /// Starts a fake replica (slot `slot`) on `cloud`, dialling `endpoint`, without inventory.
    pub fn start(cloud: &Arc<FakeCloud>, slot: u32, endpoint: &str, token: &str) -> Replica {
        Replica::launch(cloud, slot, endpoint, token, None)
    }

    /// Like [`Replica::start`], reporting inventory every `every` while serving.
    pub fn start_with_inventory(
        cloud: &Arc<FakeCloud>,
        slot: u32,
        endpoint: &str,
        token: &str,
        every: Duration,
    ) -> Replica {
        Replica::launch(cloud, slot, endpoint, token, Some(every))
    }

    /// Starts a fake replica configured as `config` (its name, resource, catalog).
    pub fn start_with_config(
        cloud: &Arc<FakeCloud>,
        config: FakeConfig,
        endpoint: &str,
        token: &str,
    ) -> Replica {
        Replica::launch_with(cloud, config, endpoint, token, None)
    }

    fn launch(
        cloud: &Arc<FakeCloud>,
        slot: u32,
        endpoint: &str,
        token: &str,
        inventory_interval: Option<Duration>,
    ) -> Replica {
        let mut config = FakeConfig::default();
        config.replica.slot = slot;
        Replica::launch_with(cloud, config, endpoint, token, inventory_interval)
    }

    fn launch_with(
        cloud: &Arc<FakeCloud>,
        config: FakeConfig,
        endpoint: &str,
        token: &str,
        inventory_interval: Option<Duration>,
    ) -> Replica {
        let slot = config.replica.slot;
        let provider = Arc::new(FakeProvider::with_config(Arc::clone(cloud), config));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("replica runtime");
        let options = RunnerOptions {
            keepalive_interval: Duration::from_millis(500),
            keepalive_timeout: Duration::from_secs(5),
            backoff: orc_common::Backoff {
                initial: Duration::from_millis(50),
                max: Duration::from_millis(200),
            },
            inventory_interval,
            catalog_interval: None,
            jitter_seed: Some(u64::from(slot)),
            ..RunnerOptions::default()
        };
        let connector = auth_connector(endpoint, token, "acme/web");
        let runner = ProviderRunner::with_connector(connector, Arc::clone(&provider), options);
        runtime.spawn(runner.run_until(std::future::pending()));
        Replica {
            provider,
            runtime: Some(runtime),
        }
    }

    /// Kills the replica and every task it was running.
    pub fn kill(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill();
    }
}

/// How long a hub test waits for replicas and deploys to get where it expects (real time).
pub const HUB_WAIT: Duration = Duration::from_secs(10);

/// Waits until the hub has `count` replicas of the fake provider, and returns its row.
pub async fn registered(hub: &Hub, store: &Store, count: usize) -> Provider {
    eventually("replicas attach", HUB_WAIT, || async {
        hub.replicas().len() == count
    })
    .await;
    store
        .provider_by_resource("urn:orc:fake:test")
        .await
        .expect("provider registered")
}

/// A pool spec on `provider`: 2 vCPU, 4 GiB, eu-central, debian-12.
pub fn spec(provider: &Provider) -> PoolSpec {
    PoolSpec {
        provider_id: provider.id.clone(),
        shape: orc_common::Shape {
            vcpus: 2,
            memory_gib: 4,
            arch: Default::default(),
            disks_gib: vec![],
        },
        region_class: "eu-central".parse().unwrap(),
        os: "debian-12".parse().unwrap(),
        public: false,
        endpoints: vec![],
        app: None,
        placement: Default::default(),
        ssh_keys: Vec::new(),
    }
}

pub async fn create_pool(
    t: &Tenant,
    provider: &Provider,
    pool: &str,
    size: u32,
) -> orc_zone::model::Pool {
    let new = NewPool {
        project_id: t.project.id.clone(),
        name: name(pool),
        size,
        spec: spec(provider),
    };
    t.store.create_pool(&new, START).await.expect("pool").pool
}

/// Runs passes (each followed by writing every answer) until `done` holds for the pool's
/// nodes, at most `passes` times.
pub async fn drive(
    reconciler: &Reconciler,
    store: &Store,
    pool: &orc_zone::model::PoolId,
    passes: usize,
    done: impl Fn(&[Node]) -> bool,
) -> Vec<Node> {
    for _ in 0..passes {
        reconciler.pass().await.expect("pass");
        reconciler.settle().await.expect("settle");
        let nodes = store.list_nodes_by_pool(pool, true).await.expect("nodes");
        if done(&nodes) {
            return nodes;
        }
    }
    let nodes = store.list_nodes_by_pool(pool, true).await.expect("nodes");
    panic!("pool did not converge: {nodes:#?}");
}

pub fn all_in(state: NodeState) -> impl Fn(&[Node]) -> bool {
    move |nodes| !nodes.is_empty() && nodes.iter().all(|n| n.status.state == state)
}

pub fn reconciler(store: &Store, backends: Backends, clock: &ManualClock) -> Reconciler {
    Reconciler::new(
        store.clone(),
        backends,
        Arc::new(clock.clone()),
        ReconcileOptions::default(),
    )
}

/// A backend calling a fake provider directly (no stream), with a settable configuration
/// change time.
pub struct Direct {
    pub provider: Arc<FakeProvider>,
    pub config_changed: std::sync::Mutex<Option<Timestamp>>,
    pub quotes: std::sync::atomic::AtomicUsize,
    /// What [`NodeBackend::site_gateways`] answers.
    pub site_gateways: std::sync::atomic::AtomicBool,
}

impl Direct {
    pub fn new(cloud: &Arc<FakeCloud>) -> Arc<Direct> {
        Arc::new(Direct {
            provider: Arc::new(FakeProvider::new(Arc::clone(cloud))),
            config_changed: std::sync::Mutex::new(Some(Timestamp(0))),
            quotes: Default::default(),
            site_gateways: Default::default(),
        })
    }
}

impl NodeBackend for Direct {
    fn quote(
        &self,
        _provider: &Provider,
        quote: orc_proto::Quote,
    ) -> impl Future<Output = Result<orc_proto::QuoteReply, BackendError>> + Send {
        self.quotes
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let provider = Arc::clone(&self.provider);
        async move { Ok(orc_provider_sdk::Provider::quote(&*provider, quote).await) }
    }

    fn deploy(
        &self,
        _provider: &Provider,
        deploy: orc_proto::Deploy,
    ) -> impl Future<Output = Result<orc_proto::DeployResult, BackendError>> + Send {
        let provider = Arc::clone(&self.provider);
        async move {
            let sink = orc_provider_sdk::ProgressSink::discard(deploy.node_id.clone());
            Ok(orc_provider_sdk::Provider::deploy(&*provider, deploy, sink).await)
        }
    }

    fn destroy(
        &self,
        _provider: &Provider,
        node: orc_zone::model::NodeId,
    ) -> impl Future<Output = Result<orc_proto::DestroyResult, BackendError>> + Send {
        let provider = Arc::clone(&self.provider);
        async move { Ok(orc_provider_sdk::Provider::destroy(&*provider, node).await) }
    }

    fn config_changed_at(&self, _provider: &Provider) -> Option<Timestamp> {
        *self.config_changed.lock().expect("lock")
    }

    fn site_gateways(&self, _provider: &Provider) -> bool {
        self.site_gateways.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Registers the fake provider's row directly (for tests without a hub).
pub async fn provider_row(t: &Tenant) -> Provider {
    t.store
        .create_provider(
            &orc_zone::model::NewProvider {
                project_id: t.project.id.clone(),
                name: name("fake"),
                resource_uri: "urn:orc:fake:test".to_string(),
                scope: orc_zone::model::ProviderScope::Project,
                pricing: orc_zone::model::PricingStrategy::None,
            },
            START,
        )
        .await
        .expect("provider")
}

/// Registers a provider of the zone's operator: in `sys/sys`, zone-scoped, as `orc up`
/// registers the partner (only such a provider may run site gateways).
pub async fn operator_provider(t: &Tenant, provider: &str) -> Provider {
    t.store
        .create_provider(
            &orc_zone::model::NewProvider {
                project_id: orc_zone::model::sys_project_id(),
                name: name(provider),
                resource_uri: format!("urn:orc:fake:{provider}"),
                scope: orc_zone::model::ProviderScope::Zone,
                pricing: orc_zone::model::PricingStrategy::None,
            },
            START,
        )
        .await
        .expect("provider")
}

pub fn role_is(hub: &Hub, slot: u32, role: orc_proto::ReplicaRole) -> bool {
    hub.replicas()
        .iter()
        .any(|r| r.slot == slot && r.role == role)
}
