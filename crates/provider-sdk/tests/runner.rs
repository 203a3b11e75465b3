//! The runner under tokio's paused clock, through the in-memory harness: reconnect
//! backoff, keep-alives and the silent-zone timeout, request correlation, roles, inventory
//! and re-sent work. All times asserted are virtual (tokio) times.

use std::sync::Arc;
use std::time::Duration;

use orc_common::Backoff;
use orc_common::Shape;
use orc_proto::{
    Bootstrap, ClassId, Deploy, DeployResult, NodeId, OsId, PoolPath, ProviderBody, Purpose, Quote,
    QuoteReply, Refusal, RefusalKind, ReplicaRole, ZoneBody,
};
use orc_provider_sdk::fake::{DeployFault, FakeCloud, FakeProvider};
use orc_provider_sdk::harness::{InMemoryConnector, ZoneConn, ZoneHarness, deploy_outcome};
use orc_provider_sdk::{ProviderRunner, RunnerOptions, RunnerStatus};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep, timeout};

fn options() -> RunnerOptions {
    RunnerOptions {
        keepalive_interval: Duration::from_secs(10),
        keepalive_timeout: Duration::from_secs(30),
        backoff: Backoff {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(8),
        },
        inventory_interval: Some(Duration::from_secs(60)),
        catalog_interval: None,
        jitter_seed: Some(42),
        ..RunnerOptions::default()
    }
}

struct Running {
    provider: Arc<FakeProvider>,
    status: watch::Receiver<RunnerStatus>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Running {
    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        (&mut self.task).await.unwrap();
    }
}

fn start(connector: InMemoryConnector, cloud: Arc<FakeCloud>, options: RunnerOptions) -> Running {
    let provider = Arc::new(FakeProvider::new(cloud));
    let runner = ProviderRunner::with_connector(connector, Arc::clone(&provider), options);
    let status = runner.status();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(runner.run_until(async {
        let _ = stopped.await;
    }));
    Running {
        provider,
        status,
        stop: Some(stop),
        task,
    }
}

fn node(s: &str) -> NodeId {
    NodeId::new(s).unwrap()
}

fn quote(node_id: &str) -> Quote {
    Quote {
        pool: PoolPath::new("acme/web/app").unwrap(),
        node_id: node(node_id),
        purpose: Purpose::Tenant,
        shape: Shape {
            vcpus: 2,
            memory_gib: 4,
            arch: Default::default(),
            disks_gib: vec![],
        },
        class: ClassId::new("eu-central").unwrap(),
        os: OsId::new("debian-12").unwrap(),
        pinned_site: None,
        public: false,
        placement: Default::default(),
        preview: false,
    }
}

async fn deploy_request(conn: &ZoneConn, node_id: &str) -> Deploy {
    let QuoteReply::Offer(offer) = conn.quote(quote(node_id)).await.unwrap() else {
        panic!("expected an offer for {node_id}");
    };
    Deploy {
        node_id: node(node_id),
        quote_token: offer.quote_token,
        os: OsId::new("debian-12").unwrap(),
        ssh_keys: vec![],
        bootstrap: Bootstrap::default(),
    }
}

#[tokio::test(start_paused = true)]
async fn reconnects_with_capped_jittered_backoff_and_resets_after_welcome() {
    let (harness, connector) = ZoneHarness::in_memory();
    connector.refuse_next(6);
    let running = start(connector.clone(), FakeCloud::new(), options());
    let conn = harness.accept().await.unwrap();
    let attempts = connector.attempts();
    assert_eq!(attempts.len(), 7);
    let backoff = options().backoff;
    for (n, pair) in attempts.windows(2).enumerate() {
        let gap = pair[1] - pair[0];
        let ceiling = backoff.ceiling(n as u32);
        assert!(
            gap >= ceiling / 2 && gap <= ceiling,
            "gap {n} was {gap:?}, outside [{:?}, {ceiling:?}]",
            ceiling / 2
        );
    }
    assert_eq!(backoff.ceiling(5), Duration::from_secs(8));
    assert_eq!(conn.hello().provider.as_str(), "fake");
    assert_eq!(conn.hello().protocol_version, orc_proto::PROTOCOL_VERSION);

    // A welcomed stream resets the backoff: the next attempt comes within the first delay.
    conn.welcome(ReplicaRole::Serving).await.unwrap();
    sleep(Duration::from_secs(1)).await;
    let dropped_at = Instant::now();
    conn.drop_stream().await;
    let again = harness.accept().await.unwrap();
    let attempts = connector.attempts();
    assert_eq!(attempts.len(), 8);
    assert!(attempts[7] - dropped_at <= backoff.initial);
    assert_eq!(running.status.borrow().streams_opened, 2);
    drop(again);
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_silent_zone_counts_as_a_dropped_stream() {
    let (harness, connector) = ZoneHarness::in_memory();
    let harness = harness.echo_keepalives(false);
    let running = start(connector.clone(), FakeCloud::new(), options());
    let conn = harness.accept().await.unwrap();
    conn.welcome(ReplicaRole::Standby).await.unwrap();
    let welcomed_at = Instant::now();
    let second = harness.accept().await.unwrap();
    let silent_for = connector.attempts()[1] - welcomed_at;
    let opts = options();
    assert!(
        silent_for >= opts.keepalive_timeout,
        "dropped after {silent_for:?}"
    );
    assert!(silent_for <= opts.keepalive_timeout + opts.backoff.initial);
    assert!(
        conn.keepalives_received() >= 2,
        "{}",
        conn.keepalives_received()
    );
    conn.closed().await;
    assert_eq!(running.provider.roles(), vec![ReplicaRole::Standby]);
    drop(second);
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn keepalives_hold_a_quiet_stream_open() {
    let (harness, connector) = ZoneHarness::in_memory();
    let running = start(connector.clone(), FakeCloud::new(), options());
    let conn = harness.accept().await.unwrap();
    conn.welcome(ReplicaRole::Standby).await.unwrap();
    sleep(Duration::from_secs(300)).await;
    assert_eq!(connector.attempts().len(), 1);
    assert!(running.status.borrow().connected);
    let keepalives = conn.keepalives_received();
    assert!(
        (29..=30).contains(&keepalives),
        "{keepalives} keep-alives in 300 s"
    );
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn concurrent_requests_are_answered_by_request_id() {
    let (harness, connector) = ZoneHarness::in_memory();
    let cloud = FakeCloud::new();
    cloud.set_deploy_delay(Duration::from_secs(5));
    let running = start(connector, Arc::clone(&cloud), options());
    let conn = harness.accept().await.unwrap();
    conn.welcome(ReplicaRole::Serving).await.unwrap();

    let slow = conn
        .request(ZoneBody::Deploy(deploy_request(&conn, "slow").await))
        .await
        .unwrap();
    let mut quotes = Vec::new();
    for n in 0..20 {
        let pending = conn
            .request(ZoneBody::Quote(quote(&format!("q{n}"))))
            .await
            .unwrap();
        quotes.push((n, pending));
    }
    let started = Instant::now();
    for (n, pending) in quotes {
        let request_id = pending.request_id();
        let (progress, body) = pending.finish().await.unwrap();
        assert!(progress.is_empty());
        match body {
            ProviderBody::QuoteReply { node_id, reply } => {
                assert_eq!(node_id.as_str(), format!("q{n}"), "request {request_id}");
                assert!(matches!(reply, QuoteReply::Offer(_)));
            }
            other => panic!("request {request_id} got {other:?}"),
        }
    }
    // The quotes were answered while the deploy was still creating its machine.
    assert_eq!(Instant::now(), started);
    assert_eq!(cloud.creates(), 0);
    let outcome = deploy_outcome(slow).await.unwrap();
    let DeployResult::Deployed(done) = outcome.result else {
        panic!("deploy refused: {:?}", outcome.result);
    };
    assert_eq!(done.node_id.as_str(), "slow");
    let words: Vec<&str> = outcome.progress.iter().map(|p| p.words.as_str()).collect();
    assert_eq!(words, vec!["Creating the machine.", "The machine is up."]);
    assert!(
        conn.protocol_errors().is_empty(),
        "{:?}",
        conn.protocol_errors()
    );
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn standby_sends_no_inventory_until_made_serving() {
    let (harness, connector) = ZoneHarness::in_memory();
    let running = start(connector, FakeCloud::new(), options());
    let conn = harness.accept().await.unwrap();
    conn.welcome(ReplicaRole::Standby).await.unwrap();
    assert!(
        timeout(Duration::from_secs(600), conn.next_inventory())
            .await
            .is_err()
    );
    conn.change_role(ReplicaRole::Serving).await.unwrap();
    let inventory = timeout(Duration::from_secs(1), conn.next_inventory())
        .await
        .unwrap();
    assert!(inventory.unwrap().nodes.is_empty());
    // Then one pass per interval.
    let before = Instant::now();
    timeout(Duration::from_secs(61), conn.next_inventory())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(Instant::now() - before, Duration::from_secs(60));
    assert_eq!(
        running.provider.roles(),
        vec![ReplicaRole::Standby, ReplicaRole::Serving]
    );
    assert_eq!(running.status.borrow().role, Some(ReplicaRole::Serving));
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn an_unreadable_inventory_is_not_sent() {
    let (harness, connector) = ZoneHarness::in_memory();
    let cloud = FakeCloud::new();
    cloud.set_inventory_unreadable(true);
    let running = start(connector, Arc::clone(&cloud), options());
    let conn = harness.accept().await.unwrap();
    conn.welcome(ReplicaRole::Serving).await.unwrap();
    assert!(
        timeout(Duration::from_secs(150), conn.next_inventory())
            .await
            .is_err()
    );
    cloud.set_inventory_unreadable(false);
    timeout(Duration::from_secs(61), conn.next_inventory())
        .await
        .unwrap()
        .unwrap();
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_deploy_resent_after_reconnect_joins_the_running_one() {
    let (harness, connector) = ZoneHarness::in_memory();
    let cloud = FakeCloud::new();
    cloud.set_deploy_delay(Duration::from_secs(10));
    let running = start(connector, Arc::clone(&cloud), options());
    let conn = harness.accept().await.unwrap();
    conn.welcome(ReplicaRole::Serving).await.unwrap();
    let deploy = deploy_request(&conn, "n1").await;
    let mut in_flight = conn
        .request(ZoneBody::Deploy(deploy.clone()))
        .await
        .unwrap();
    assert!(matches!(
        in_flight.next().await,
        Some(Ok(ProviderBody::DeployProgress(_)))
    ));
    sleep(Duration::from_secs(2)).await;
    conn.drop_stream().await;
    assert!(in_flight.finish().await.is_err());

    let conn = harness.accept().await.unwrap();
    conn.welcome(ReplicaRole::Serving).await.unwrap();
    let outcome = conn.deploy(deploy.clone()).await.unwrap();
    let DeployResult::Deployed(done) = outcome.result else {
        panic!("deploy refused: {:?}", outcome.result);
    };
    assert_eq!(cloud.creates(), 1);
    assert_eq!(cloud.instance_count(&node("n1")), 1);
    // The joined request finished with the original: no second creation, no new notes.
    assert!(outcome.progress.is_empty());
    let again = conn.deploy(deploy).await.unwrap();
    assert_eq!(again.result, DeployResult::Deployed(done));
    assert_eq!(cloud.creates(), 1);
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_failure_after_create_is_healed_by_the_next_deploy() {
    let (harness, connector) = ZoneHarness::in_memory();
    let cloud = FakeCloud::new();
    let transient = Refusal::new(RefusalKind::Transient, "Try again shortly.");
    cloud.push_deploy_fault(DeployFault::FailAfterCreate(transient.clone()));
    let running = start(connector, Arc::clone(&cloud), options());
    let conn = harness.accept().await.unwrap();
    conn.welcome(ReplicaRole::Serving).await.unwrap();
    let deploy = deploy_request(&conn, "n1").await;
    assert_eq!(
        conn.deploy(deploy.clone()).await.unwrap().result,
        DeployResult::Refused(transient)
    );
    let DeployResult::Deployed(done) = conn.deploy(deploy).await.unwrap().result else {
        panic!("the retried deploy was refused");
    };
    assert_eq!(done.instance_ref.as_str(), "fake-000001");
    assert_eq!(cloud.creates(), 1);
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn the_catalog_is_sent_again_on_its_interval() {
    let (harness, connector) = ZoneHarness::in_memory();
    let cloud = FakeCloud::new();
    let opts = RunnerOptions {
        catalog_interval: Some(Duration::from_secs(60)),
        ..options()
    };
    let running = start(connector, Arc::clone(&cloud), opts);
    let conn = harness.accept().await.unwrap();
    conn.welcome(ReplicaRole::Serving).await.unwrap();
    assert!(
        conn.catalog()
            .availability
            .classes
            .iter()
            .all(|c| c.can_place)
    );
    let eu = ClassId::new("eu-central").unwrap();
    cloud.refuse_class(
        eu.clone(),
        Some(Refusal::new(RefusalKind::NoCapacity, "Full.")),
    );
    let catalog = timeout(Duration::from_secs(61), conn.next_catalog())
        .await
        .unwrap()
        .unwrap();
    let eu_availability = catalog
        .availability
        .classes
        .iter()
        .find(|c| c.class == eu)
        .unwrap();
    assert!(!eu_availability.can_place);
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn every_refusal_kind_reaches_the_zone_unchanged() {
    let (harness, connector) = ZoneHarness::in_memory();
    let cloud = FakeCloud::new();
    let running = start(connector, Arc::clone(&cloud), options());
    let conn = harness.accept().await.unwrap();
    conn.welcome(ReplicaRole::Serving).await.unwrap();
    for kind in RefusalKind::ALL {
        let refusal = Refusal::new(kind, format!("Words for {kind}."));
        let id = format!("refused-{kind}");
        cloud.refuse_node(node(&id), Some(refusal.clone()));
        assert_eq!(
            conn.quote(quote(&id)).await.unwrap(),
            QuoteReply::Refused(refusal.clone())
        );
        let deploy = {
            cloud.refuse_node(node(&id), None);
            let d = deploy_request(&conn, &id).await;
            cloud.push_deploy_fault(DeployFault::RefuseBeforeCreate(refusal.clone()));
            d
        };
        assert_eq!(
            conn.deploy(deploy).await.unwrap().result,
            DeployResult::Refused(refusal.clone())
        );
        cloud.push_destroy_fault(refusal.clone());
        assert_eq!(
            conn.destroy(node(&id)).await.unwrap(),
            orc_proto::DestroyResult::Refused(refusal)
        );
    }
    assert_eq!(cloud.creates(), 0);
    running.stop().await;
}

#[tokio::test]
async fn an_invalid_endpoint_is_refused_at_start() {
    let provider = Arc::new(FakeProvider::new(FakeCloud::new()));
    let err = ProviderRunner::new("not a uri", provider, RunnerOptions::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "zone endpoint \"not a uri\" is not a valid URI"
    );
}

#[tokio::test(start_paused = true)]
async fn shutdown_stops_the_runner_while_it_waits_to_reconnect() {
    let (_harness, connector) = ZoneHarness::in_memory();
    connector.refuse_next(u32::MAX);
    let running = start(connector.clone(), FakeCloud::new(), options());
    sleep(Duration::from_secs(60)).await;
    let attempts = connector.attempts().len();
    assert!(attempts > 3, "{attempts} attempts in 60 s");
    running.stop().await;
    sleep(Duration::from_secs(60)).await;
    assert_eq!(connector.attempts().len(), attempts);
}

#[tokio::test(start_paused = true)]
async fn an_unreadable_quote_is_refused_not_left_waiting() {
    let (harness, connector) = ZoneHarness::in_memory();
    let running = start(connector, FakeCloud::new(), options());
    let conn = harness.accept().await.unwrap();
    conn.welcome(ReplicaRole::Serving).await.unwrap();
    let mut wire = orc_proto::pb::Quote::from(quote("n1"));
    wire.shape = None;
    let pending = conn
        .request_wire(orc_proto::pb::zone_message::Body::Quote(wire))
        .await
        .unwrap();
    let (_, body) = pending.finish().await.unwrap();
    assert_eq!(
        body,
        ProviderBody::QuoteReply {
            node_id: node("n1"),
            reply: QuoteReply::Refused(Refusal::new(
                RefusalKind::Failed,
                "The request could not be processed."
            )),
        }
    );
    // The stream stays up and serves the next request.
    assert!(matches!(
        conn.quote(quote("n2")).await.unwrap(),
        QuoteReply::Offer(_)
    ));
    running.stop().await;
}
