//! Reconciler and failover benchmarks.
//!
//! - `pass_10k`: one reconcile pass over 10,000 due nodes of one pool with an instant fake
//!   backend: read the due nodes, claim them (batched compare-and-set), send 10,000 quotes,
//!   and write the 10,000 answers back (target ≤ 1 s). SQLite in a temp dir. The process's
//!   resident memory (`VmRSS`) after the passes is printed.
//! - `failover`: two fake replicas over loopback gRPC; the serving one is killed (its
//!   runtime shut down, as SIGKILL would) and a quote sent at once is timed until the
//!   promoted standby answers it.
//!
//! `cargo bench -p orc-zone --bench reconcile`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use criterion::{Criterion, criterion_group, criterion_main};
use orc_common::time::ManualClock;
use orc_common::{Money, Shape};
use orc_proto::{
    ClassId, DeployResult, DestroyResult, Offer, OsId, Purpose, Quote, QuoteReply, QuoteToken,
    SiteName,
};
use orc_provider_sdk::fake::{FakeCloud, FakeProvider};
use orc_provider_sdk::{ProviderRunner, RunnerOptions, ZoneCredentials};
use orc_zone::backend::{BackendError, Backends, NodeBackend};
use orc_zone::hub::{Hub, HubOptions};
use orc_zone::model::{
    Name, NewPool, NewProvider, PoolSpec, PricingStrategy, Provider, ProviderScope, Role, Timestamp,
};
use orc_zone::reconcile::{ReconcileOptions, Reconciler};
use orc_zone::store::Store;
use rust_decimal::Decimal;
use tokio::runtime::Runtime;

const NODES: u32 = 10_000;

fn name(s: &str) -> Name {
    s.parse().expect("valid name")
}

/// Answers every request at once: an offer, a deployed node, a destroy.
struct Instant0;

impl NodeBackend for Instant0 {
    fn quote(
        &self,
        _provider: &Provider,
        quote: Quote,
    ) -> impl Future<Output = Result<QuoteReply, BackendError>> + Send {
        std::future::ready(Ok(QuoteReply::Offer(Offer {
            site: SiteName::new("eu-central-a").expect("site"),
            price: Some(Money::usd_per_month(Decimal::new(500, 2))),
            words: "2 vCPU · 4 GiB · eu-central".into(),
            quote_token: QuoteToken::new(format!("t-{}", quote.node_id)).expect("token"),
            expires: SystemTime::UNIX_EPOCH + Duration::from_secs(2_000_000_000),
        })))
    }

    fn deploy(
        &self,
        _provider: &Provider,
        deploy: orc_proto::Deploy,
    ) -> impl Future<Output = Result<DeployResult, BackendError>> + Send {
        std::future::ready(Ok(DeployResult::Deployed(orc_proto::Deployed {
            node_id: deploy.node_id.clone(),
            site: SiteName::new("eu-central-a").expect("site"),
            addresses: vec![],
            price: None,
            instance_ref: orc_proto::InstanceRef::new(deploy.node_id.to_string()).expect("ref"),
            placed: None,
        })))
    }

    fn destroy(
        &self,
        _provider: &Provider,
        _node: orc_zone::model::NodeId,
    ) -> impl Future<Output = Result<DestroyResult, BackendError>> + Send {
        std::future::ready(Ok(DestroyResult::Destroyed))
    }
}

fn spec(provider: &Provider) -> PoolSpec {
    PoolSpec {
        provider_id: provider.id.clone(),
        shape: Shape {
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

fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn pass_10k(c: &mut Criterion) {
    let runtime = Runtime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let (store, provider, project) = runtime.block_on(async {
        let store = Store::open_sqlite_file(&dir.path().join("zone.db"))
            .await
            .expect("store");
        let org = store
            .create_org(&name("bench"), Timestamp(0))
            .await
            .expect("org");
        let project = store
            .create_project(&org.id, &name("bench"), Timestamp(0))
            .await
            .expect("project");
        let provider = store
            .create_provider(
                &NewProvider {
                    project_id: project.id.clone(),
                    name: name("fake"),
                    resource_uri: "urn:orc:bench".into(),
                    scope: ProviderScope::Project,
                    pricing: PricingStrategy::None,
                },
                Timestamp(0),
            )
            .await
            .expect("provider");
        (store, provider, project)
    });
    let clock = ManualClock::new(Timestamp(1_772_323_200_000));
    let reconciler = Reconciler::new(
        store.clone(),
        Backends::single(Arc::new(Instant0)),
        Arc::new(clock.clone()),
        ReconcileOptions::default(),
    );
    let mut pools = 0u32;
    let mut group = c.benchmark_group("reconcile");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    group.bench_function("pass_10k", |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                runtime.block_on(async {
                    // Ends the previous pool's nodes so each pass sees exactly 10,000 due.
                    for pool in store.list_all_pools().await.expect("pools") {
                        store
                            .mark_pool_deleting(&pool.id, Timestamp(0))
                            .await
                            .expect("mark");
                        for node in store.list_nodes_by_pool(&pool.id, false).await.expect("n") {
                            store
                                .end_node(
                                    &node.id,
                                    orc_zone::model::Expected::Version(node.version),
                                    None,
                                    Timestamp(0),
                                )
                                .await
                                .expect("end");
                        }
                        store.delete_pool(&pool.id).await.expect("delete");
                    }
                    pools += 1;
                    let new = NewPool {
                        project_id: project.id.clone(),
                        name: name(&format!("p{pools}")),
                        size: NODES,
                        spec: spec(&provider),
                    };
                    store.create_pool(&new, Timestamp(0)).await.expect("pool");
                    let started = Instant::now();
                    let report = reconciler.pass().await.expect("pass");
                    reconciler.settle().await.expect("settle");
                    total += started.elapsed();
                    assert_eq!(report.requests, NODES as usize);
                });
            }
            total
        });
    });
    group.finish();
    eprintln!(
        "reconcile/pass_10k: resident memory after the passes: {} KiB",
        rss_kib().map_or_else(|| "unknown".to_string(), |k| k.to_string())
    );
}

fn replica(cloud: &Arc<FakeCloud>, endpoint: &str, token: &str, slot: u32) -> Runtime {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let mut config = orc_provider_sdk::fake::FakeConfig::default();
    config.replica.slot = slot;
    let provider = Arc::new(FakeProvider::with_config(Arc::clone(cloud), config));
    let options = RunnerOptions {
        inventory_interval: None,
        catalog_interval: None,
        credentials: Some(ZoneCredentials::new(token, "bench/bench").expect("credentials")),
        ..RunnerOptions::default()
    };
    let runner = ProviderRunner::new(endpoint, provider, options).expect("runner");
    runtime.spawn(runner.run_until(std::future::pending()));
    runtime
}

/// A store with project bench/bench and a token of its owner.
async fn hub_store(dir: &std::path::Path) -> (Store, String) {
    let store = Store::open_sqlite_file(&dir.join("zone.db"))
        .await
        .expect("store");
    let org = store
        .create_org(&name("bench"), Timestamp(0))
        .await
        .expect("org");
    let project = store
        .create_project(&org.id, &name("bench"), Timestamp(0))
        .await
        .expect("project");
    let user = store
        .create_user(&name("ops"), Timestamp(0))
        .await
        .expect("user");
    store
        .add_membership(
            &user.id,
            &org.id,
            Some(&project.id),
            Role::Owner,
            Timestamp(0),
        )
        .await
        .expect("membership");
    let (_, secret) = store
        .create_token(&user.id, "bench", None, None, Timestamp(0))
        .await
        .expect("token");
    (store, secret.expose().to_string())
}

fn failover(c: &mut Criterion) {
    let runtime = Runtime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let (store, token) = runtime.block_on(hub_store(dir.path()));
    let mut group = c.benchmark_group("hub");
    group.sample_size(10);
    group.bench_function("failover", |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                total += runtime.block_on(failover_once(&store, &token));
            }
            total
        });
    });
    group.finish();
}

async fn failover_once(store: &Store, token: &str) -> Duration {
    let hub = Hub::new(store.clone(), HubOptions::default());
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("bind");
    let endpoint = format!("http://{}", listener.local_addr().expect("address"));
    let serving = hub.clone();
    let server = tokio::spawn(async move {
        let _ = serving.serve(listener, std::future::pending()).await;
    });
    let cloud = FakeCloud::new();
    let first = replica(&cloud, &endpoint, token, 0);
    wait_until(|| {
        hub.replicas()
            .iter()
            .any(|r| r.role == orc_proto::ReplicaRole::Serving)
    })
    .await;
    let second = replica(&cloud, &endpoint, token, 1);
    wait_until(|| hub.replicas().len() == 2).await;
    let provider = store
        .provider_by_resource("urn:orc:fake:test")
        .await
        .expect("provider");
    let quote = bench_quote(&provider);
    let started = Instant::now();
    first.shutdown_background();
    // The quote may meet the dead stream (and be re-sent on promotion) or the promoted one.
    loop {
        match hub.quote(&provider, quote.clone()).await {
            Ok(_) => break,
            Err(BackendError::NoReplica { .. }) => tokio::task::yield_now().await,
            Err(e) => panic!("quote failed during failover: {e}"),
        }
    }
    let elapsed = started.elapsed();
    hub.shutdown();
    second.shutdown_background();
    server.abort();
    elapsed
}

fn bench_quote(provider: &Provider) -> Quote {
    Quote {
        pool: orc_proto::PoolPath::new("bench/bench/p").expect("pool"),
        node_id: orc_zone::model::NodeId::from_counter(0x99),
        purpose: Purpose::Tenant,
        shape: spec(provider).shape,
        class: ClassId::new("eu-central").expect("class"),
        os: OsId::new("debian-12").expect("os"),
        pinned_site: None,
        public: false,
        placement: Default::default(),
        preview: false,
    }
}

/// Quote round trip zone → provider → zone through the real hub over loopback gRPC, one
/// quote at a time; prints p50 and p99 of 5,000 quotes besides criterion's figures.
fn quote_round_trip(c: &mut Criterion) {
    let runtime = Runtime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let (store, token) = runtime.block_on(hub_store(dir.path()));
    let hub = Hub::new(store.clone(), HubOptions::default());
    let (endpoint, server) = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .expect("bind");
        let endpoint = format!("http://{}", listener.local_addr().expect("address"));
        let serving = hub.clone();
        let server = tokio::spawn(async move {
            let _ = serving.serve(listener, std::future::pending()).await;
        });
        (endpoint, server)
    });
    let cloud = FakeCloud::new();
    let provider_runtime = replica(&cloud, &endpoint, &token, 0);
    let provider = runtime.block_on(async {
        wait_until(|| hub.replicas().len() == 1).await;
        store
            .provider_by_resource("urn:orc:fake:test")
            .await
            .expect("provider")
    });
    let quote = bench_quote(&provider);
    let mut samples: Vec<Duration> = runtime.block_on(async {
        let mut samples = Vec::with_capacity(5_000);
        for _ in 0..5_000 {
            let started = Instant::now();
            hub.quote(&provider, quote.clone()).await.expect("quote");
            samples.push(started.elapsed());
        }
        samples
    });
    samples.sort_unstable();
    eprintln!(
        "hub/quote_round_trip: p50 {:?}, p99 {:?} over {} quotes",
        samples[samples.len() / 2],
        samples[samples.len() * 99 / 100],
        samples.len()
    );
    let mut group = c.benchmark_group("hub");
    group.bench_function("quote_round_trip", |b| {
        b.iter(|| {
            runtime
                .block_on(hub.quote(&provider, quote.clone()))
                .expect("quote")
        });
    });
    group.finish();
    hub.shutdown();
    provider_runtime.shutdown_background();
    server.abort();
}

async fn wait_until(mut check: impl FnMut() -> bool) {
    while !check() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

criterion_group!(benches, pass_10k, failover, quote_round_trip);
criterion_main!(benches);
