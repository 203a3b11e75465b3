//! Store benchmarks for a reconciler pass over 10,000 nodes (target: a pass ≤ 1 s).
//!
//! - `insert_10k`: one pool created with 10,000 pending nodes (one transaction, batched);
//! - `due_10k`: read all 10,000 due nodes;
//! - `update_10k`: 10,000 compare-and-set status writes in one batched call;
//! - `pass_10k`: a whole pass, read due then write every node.
//!
//! Runs on SQLite in a temp dir; set `ORC_BENCH_POSTGRES_URL` to also run on PostgreSQL
//! (an empty database: the due-node benches expect to see only their own 10,000 nodes).
//! `cargo bench -p orc-zone-store --bench store`.

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use orc_common::{Currency, Money, Period, Shape};
use orc_zone_model::{
    Expected, Name, NewPool, NewProvider, NodeState, NodeStatus, PoolSpec, PricingStrategy,
    ProjectId, ProviderId, ProviderScope, Timestamp,
};
use orc_zone_store::{StatusWrite, Store, sqlite_url};
use rust_decimal::Decimal;
use tokio::runtime::Runtime;

const NODES: u32 = 10_000;

fn name(s: &str) -> Name {
    s.parse().expect("valid name")
}

struct Bench {
    store: Store,
    project: ProjectId,
    provider: ProviderId,
    pools: u32,
}

impl Bench {
    async fn new(url: &str) -> Bench {
        let store = Store::open(url).await.expect("open store");
        let tag = rand::random::<u32>();
        let org = store
            .create_org(&name(&format!("bench-{tag:08x}")), Timestamp(0))
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
                    name: name("cloud"),
                    resource_uri: format!("urn:orc:bench:{tag:08x}"),
                    scope: ProviderScope::Project,
                    pricing: PricingStrategy::None,
                },
                Timestamp(0),
            )
            .await
            .expect("provider");
        Bench {
            store,
            project: project.id,
            provider: provider.id,
            pools: 0,
        }
    }

    async fn pool(&mut self, size: u32) {
        self.pools += 1;
        self.store
            .create_pool(
                &NewPool {
                    project_id: self.project.clone(),
                    name: name(&format!("pool-{}", self.pools)),
                    size,
                    spec: PoolSpec {
                        provider_id: self.provider.clone(),
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
                    },
                },
                Timestamp(0),
            )
            .await
            .expect("pool");
    }
}

/// The write a reconciler makes for a due node: running, priced, due again in a minute.
fn step(node: &orc_zone_model::Node, now: Timestamp) -> StatusWrite {
    StatusWrite {
        id: node.id.clone(),
        expected: Expected::Version(node.version),
        status: NodeStatus {
            state: NodeState::Running,
            site: Some("eu-central-a".to_string()),
            price: Some(Money::new(Decimal::new(88, 4), Currency::USD, Period::Hour)),
            attempts: node.status.attempts + 1,
            next_attempt_at: Some(now),
            ..node.status.clone()
        },
    }
}

fn bench_engine(c: &mut Criterion, rt: &Runtime, engine: &str, url: &str) {
    let mut group = c.benchmark_group(format!("store/{engine}"));
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(8));

    let mut pass = rt.block_on(Bench::new(url));
    rt.block_on(pass.pool(NODES));
    let store = pass.store.clone();
    let mut now = Timestamp(1);
    group.bench_function("due_10k", |b| {
        b.iter(|| {
            let due = rt
                .block_on(store.nodes_due(Timestamp(i64::MAX), NODES))
                .expect("due");
            assert_eq!(due.len(), NODES as usize);
        })
    });
    group.bench_function("update_10k", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let nodes = rt
                    .block_on(store.list_nodes_by_pool(&first_pool(rt, &store, &pass), false))
                    .expect("nodes");
                now = now.plus_millis(1);
                let writes: Vec<StatusWrite> = nodes.iter().map(|n| step(n, now)).collect();
                let start = Instant::now();
                let outcome = rt
                    .block_on(store.update_node_states(&writes, now))
                    .expect("update");
                total += start.elapsed();
                assert_eq!(outcome.updated.len(), NODES as usize);
            }
            total
        })
    });
    group.bench_function("pass_10k", |b| {
        b.iter(|| {
            now = now.plus_millis(1);
            rt.block_on(async {
                let due = store.nodes_due(now, NODES).await.expect("due");
                let writes: Vec<StatusWrite> = due.iter().map(|n| step(n, now)).collect();
                let outcome = store
                    .update_node_states(&writes, now)
                    .await
                    .expect("update");
                assert_eq!(outcome.updated.len(), due.len());
            })
        })
    });
    let mut inserts = rt.block_on(Bench::new(url));
    group.bench_function("insert_10k", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let start = Instant::now();
                rt.block_on(inserts.pool(NODES));
                total += start.elapsed();
            }
            total
        })
    });

    group.finish();
}

fn first_pool(rt: &Runtime, store: &Store, bench: &Bench) -> orc_zone_model::PoolId {
    rt.block_on(store.list_pools(&bench.project))
        .expect("pools")
        .remove(0)
        .id
}

fn benches(c: &mut Criterion) {
    let rt = Runtime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let url = sqlite_url(&dir.path().join("bench.db"));
    bench_engine(c, &rt, "sqlite", &url);
    if let Ok(url) = std::env::var("ORC_BENCH_POSTGRES_URL") {
        bench_engine(c, &rt, "postgres", &url);
    }
}

criterion_group!(store_benches, benches);
criterion_main!(store_benches);
