//! The runner over real gRPC on loopback: a zone that comes up late, and a zone that
//! restarts under a connected provider.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use orc_common::Backoff;
use orc_proto::ReplicaRole;
use orc_provider_sdk::fake::{FakeCloud, FakeProvider};
use orc_provider_sdk::harness::ZoneHarness;
use orc_provider_sdk::{ProviderRunner, RunnerOptions, RunnerStatus};
use tokio::sync::watch;
use tokio::time::{sleep, timeout};

const STEP: Duration = Duration::from_secs(20);

fn options() -> RunnerOptions {
    RunnerOptions {
        backoff: Backoff {
            initial: Duration::from_millis(20),
            max: Duration::from_millis(200),
        },
        jitter_seed: Some(1),
        ..RunnerOptions::default()
    }
}

fn free_port() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

/// Binds `address` again, waiting for the previous listener on it to be gone.
async fn harness_on(address: SocketAddr) -> ZoneHarness {
    for _ in 0..100 {
        if let Ok(harness) = ZoneHarness::grpc_on(address).await {
            return harness;
        }
        sleep(Duration::from_millis(20)).await;
    }
    panic!("could not bind {address} again");
}

fn start(address: SocketAddr) -> (watch::Receiver<RunnerStatus>, tokio::task::JoinHandle<()>) {
    let provider = Arc::new(FakeProvider::new(FakeCloud::new()));
    let runner = ProviderRunner::new(&format!("http://{address}"), provider, options()).unwrap();
    let status = runner.status();
    let task = tokio::spawn(runner.run_until(std::future::pending()));
    (status, task)
}

#[tokio::test]
async fn the_runner_waits_for_a_zone_that_starts_later() {
    let address = free_port();
    let (status, task) = start(address);
    // No zone listens yet: the runner keeps trying (two failed attempts prove it backs off and
    // tries again) and opens no stream.
    let mut watching = status.clone();
    timeout(STEP, watching.wait_for(|s| s.connect_attempts >= 2))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.borrow().streams_opened, 0);
    assert!(!status.borrow().connected);
    let harness = harness_on(address).await;
    let conn = timeout(STEP, harness.accept()).await.unwrap().unwrap();
    conn.welcome(ReplicaRole::Serving).await.unwrap();
    assert_eq!(conn.hello().provider.as_str(), "fake");
    let mut status = status.clone();
    timeout(
        STEP,
        status.wait_for(|s| s.role == Some(ReplicaRole::Serving)),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(status.borrow().connected);
    task.abort();
}

#[tokio::test]
async fn the_runner_reconnects_to_a_restarted_zone() {
    let harness = ZoneHarness::grpc().await.unwrap();
    let address: SocketAddr = harness
        .endpoint()
        .unwrap()
        .trim_start_matches("http://")
        .parse()
        .unwrap();
    let (status, task) = start(address);
    let conn = timeout(STEP, harness.accept()).await.unwrap().unwrap();
    conn.welcome(ReplicaRole::Standby).await.unwrap();
    drop(conn);
    drop(harness);

    let restarted = harness_on(address).await;
    let conn = timeout(STEP, restarted.accept()).await.unwrap().unwrap();
    conn.welcome(ReplicaRole::Serving).await.unwrap();
    let mut status = status.clone();
    timeout(
        STEP,
        status.wait_for(|s| s.role == Some(ReplicaRole::Serving)),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(status.borrow().streams_opened, 2);
    task.abort();
}

#[tokio::test]
async fn a_standby_replica_takes_over_and_finds_the_serving_replicas_work() {
    let harness = ZoneHarness::grpc().await.unwrap();
    let endpoint = harness.endpoint().unwrap();
    let cloud = FakeCloud::new();
    let replica = |slot: u32| {
        let config = orc_provider_sdk::fake::FakeConfig {
            replica: orc_proto::Replica {
                host: "localhost".into(),
                pid: std::process::id(),
                slot,
            },
            ..Default::default()
        };
        let provider = Arc::new(FakeProvider::with_config(Arc::clone(&cloud), config));
        let runner = ProviderRunner::new(&endpoint, Arc::clone(&provider), options()).unwrap();
        (
            provider,
            tokio::spawn(runner.run_until(std::future::pending())),
        )
    };
    let (first, first_task) = replica(0);
    let a = timeout(STEP, harness.accept()).await.unwrap().unwrap();
    let (second, second_task) = replica(1);
    let b = timeout(STEP, harness.accept()).await.unwrap().unwrap();
    assert_eq!(a.hello().resource_uri, b.hello().resource_uri);
    assert_eq!((a.hello().replica.slot, b.hello().replica.slot), (0, 1));
    a.welcome(ReplicaRole::Serving).await.unwrap();
    b.welcome(ReplicaRole::Standby).await.unwrap();

    let quote = orc_proto::Quote {
        pool: orc_proto::PoolPath::new("acme/web/app").unwrap(),
        node_id: orc_proto::NodeId::new("n1").unwrap(),
        purpose: orc_proto::Purpose::Tenant,
        shape: orc_common::Shape {
            vcpus: 1,
            memory_gib: 2,
            arch: Default::default(),
            disks_gib: vec![],
        },
        class: orc_proto::ClassId::new("eu-central").unwrap(),
        os: orc_proto::OsId::new("debian-12").unwrap(),
        pinned_site: None,
        public: false,
        placement: Default::default(),
        preview: false,
    };
    let orc_proto::QuoteReply::Offer(offer) = a.quote(quote).await.unwrap() else {
        panic!("expected an offer");
    };
    let deploy = orc_proto::Deploy {
        node_id: orc_proto::NodeId::new("n1").unwrap(),
        quote_token: offer.quote_token,
        os: orc_proto::OsId::new("debian-12").unwrap(),
        ssh_keys: vec![],
        bootstrap: orc_proto::Bootstrap::default(),
    };
    let done = a.deploy(deploy.clone()).await.unwrap().result;

    // The serving replica dies; the zone promotes the standby and sends the deploy again,
    // as it would for an answer it never received.
    first_task.abort();
    a.drop_stream().await;
    b.change_role(ReplicaRole::Serving).await.unwrap();
    assert_eq!(b.deploy(deploy).await.unwrap().result, done);
    assert_eq!(cloud.creates(), 1);
    assert_eq!(first.roles(), vec![ReplicaRole::Serving]);
    assert_eq!(
        second.roles(),
        vec![ReplicaRole::Standby, ReplicaRole::Serving]
    );
    second_task.abort();
}
