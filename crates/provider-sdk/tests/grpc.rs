//! The runner over real gRPC on loopback: a zone that comes up late, and a zone that
//! restarts under a connected provider.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use orc_proto::Role;
use orc_provider_sdk::fake::{FakeCloud, FakeProvider};
use orc_provider_sdk::harness::ZoneHarness;
use orc_provider_sdk::{Backoff, ProviderRunner, RunnerOptions, RunnerStatus};
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
    sleep(Duration::from_millis(300)).await;
    assert_eq!(status.borrow().streams_opened, 0);
    let harness = harness_on(address).await;
    let conn = timeout(STEP, harness.accept()).await.unwrap().unwrap();
    conn.welcome(Role::Serving).await.unwrap();
    assert_eq!(conn.hello().provider.as_str(), "fake");
    let mut status = status.clone();
    timeout(STEP, status.wait_for(|s| s.role == Some(Role::Serving)))
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
    conn.welcome(Role::Standby).await.unwrap();
    drop(conn);
    drop(harness);

    let restarted = harness_on(address).await;
    let conn = timeout(STEP, restarted.accept()).await.unwrap().unwrap();
    conn.welcome(Role::Serving).await.unwrap();
    let mut status = status.clone();
    timeout(STEP, status.wait_for(|s| s.role == Some(Role::Serving)))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.borrow().streams_opened, 2);
    task.abort();
}
