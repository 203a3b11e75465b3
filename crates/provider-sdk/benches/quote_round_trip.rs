//! Quote round trips zone → provider → zone over the real gRPC stream on loopback, with the
//! in-memory `FakeProvider` (no cloud calls), so the figure is the protocol's own cost.
//!
//! Run with `cargo bench -p orc-provider-sdk --bench quote_round_trip`. Prints p50, p99 and
//! max latency of sequential quotes, and the throughput of quotes with 64 in flight.

use std::sync::Arc;
use std::time::{Duration, Instant};

use orc_common::Shape;
use orc_proto::{
    ClassId, NodeId, OsId, PoolPath, Purpose, Quote, QuoteReply, ReplicaRole, ZoneBody,
};
use orc_provider_sdk::fake::{FakeCloud, FakeProvider};
use orc_provider_sdk::harness::ZoneHarness;
use orc_provider_sdk::{ProviderRunner, RunnerOptions};

const SEQUENTIAL: usize = 5_000;
const CONCURRENT: usize = 20_000;
const IN_FLIGHT: usize = 64;

fn quote(n: usize) -> Quote {
    Quote {
        pool: PoolPath::new("acme/web/app").expect("non-empty"),
        node_id: NodeId::new(format!("node-{n}")).expect("non-empty"),
        purpose: Purpose::Tenant,
        shape: Shape {
            vcpus: 2,
            memory_gib: 4,
            arch: Default::default(),
            disks_gib: vec![],
        },
        class: ClassId::new("eu-central").expect("non-empty"),
        os: OsId::new("debian-12").expect("non-empty"),
        pinned_site: None,
        public: false,
        placement: Default::default(),
        preview: false,
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(async {
        let harness = ZoneHarness::grpc().await.expect("harness");
        let endpoint = harness.endpoint().expect("gRPC endpoint");
        let provider = Arc::new(FakeProvider::new(FakeCloud::new()));
        let runner =
            ProviderRunner::new(&endpoint, provider, RunnerOptions::default()).expect("runner");
        let _runner = tokio::spawn(runner.run_until(std::future::pending()));
        let conn = Arc::new(harness.accept().await.expect("provider stream"));
        conn.welcome(ReplicaRole::Serving).await.expect("welcome");

        for n in 0..500 {
            conn.quote(quote(n)).await.expect("warm-up quote");
        }
        let mut latencies = Vec::with_capacity(SEQUENTIAL);
        for n in 0..SEQUENTIAL {
            let started = Instant::now();
            let reply = conn.quote(quote(n)).await.expect("quote");
            latencies.push(started.elapsed());
            assert!(matches!(reply, QuoteReply::Offer(_)));
        }
        latencies.sort();
        println!(
            "sequential quote round trip over {SEQUENTIAL}: p50 {:?}, p99 {:?}, max {:?}",
            percentile(&latencies, 0.50),
            percentile(&latencies, 0.99),
            latencies[latencies.len() - 1]
        );

        let started = Instant::now();
        let mut workers = Vec::new();
        for worker in 0..IN_FLIGHT {
            let conn = Arc::clone(&conn);
            workers.push(tokio::spawn(async move {
                for n in (worker..CONCURRENT).step_by(IN_FLIGHT) {
                    let pending = conn.request(ZoneBody::Quote(quote(n))).await.expect("send");
                    pending.finish().await.expect("reply");
                }
            }));
        }
        for worker in workers {
            worker.await.expect("worker");
        }
        let elapsed = started.elapsed();
        println!(
            "{CONCURRENT} quotes with {IN_FLIGHT} in flight: {:?}, {:.0} quotes/s",
            elapsed,
            CONCURRENT as f64 / elapsed.as_secs_f64()
        );
    });
}
