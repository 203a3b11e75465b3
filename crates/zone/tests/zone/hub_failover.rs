//! The hub over real loopback gRPC with fake provider replicas under the real runner:
//! registration, roles, pools reaching running, failover with nothing lost or duplicated,
//! authentication, and a zone restart that repeats no create.

use std::sync::Arc;
use std::time::Duration;

use crate::hub_support::*;
use orc_common::time::ManualClock;
use orc_proto::ReplicaRole;
use orc_provider_sdk::fake::FakeCloud;
use orc_testkit::{eventually, eventually_some};
use orc_zone::backend::Backends;
use orc_zone::model::NodeState;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hub_pool_of_three_gets_quotes_and_deploys_and_runs() {
    let dir = tempfile::tempdir().unwrap();
    let t = tenant(&dir).await;
    let clock = ManualClock::new(START);
    let server = HubServer::start(&t.store, &clock, None).await;
    let cloud = FakeCloud::new();
    let _replica = Replica::start(&cloud, 0, &server.endpoint(), &t.token);
    let provider = registered(&server.hub, &t.store, 1).await;
    assert_eq!(
        provider.project_id, t.project.id,
        "registered in its own project"
    );
    let catalog = server.hub.catalog(&provider).expect("catalog kept");
    assert_eq!(catalog.catalog.classes[0].id.as_str(), "eu-central");

    let pool = create_pool(&t, &provider, "web", 3).await;
    let reconciler = reconciler(
        &t.store,
        Backends::single(Arc::new(server.hub.clone())),
        &clock,
    );
    let nodes = drive(
        &reconciler,
        &t.store,
        &pool.id,
        5,
        all_in(NodeState::Running),
    )
    .await;
    assert_eq!(nodes.len(), 3);
    for node in &nodes {
        let id = node.id.clone();
        assert_eq!(cloud.instance_count(&id), 1, "one instance for {}", node.id);
        assert_eq!(node.status.site.as_deref(), Some("eu-central-a"));
        assert!(node.status.instance_ref.is_some());
        assert_eq!(node.status.price, None, "no pricing strategy: unpriced");
    }
    assert_eq!(cloud.creates(), 3);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hub_killing_the_serving_replica_promotes_the_standby_and_resends() {
    let dir = tempfile::tempdir().unwrap();
    let t = tenant(&dir).await;
    let clock = ManualClock::new(START);
    let server = HubServer::start(&t.store, &clock, None).await;
    let cloud = FakeCloud::new();
    let mut first = Replica::start(&cloud, 0, &server.endpoint(), &t.token);
    eventually("first replica serves", HUB_WAIT, || async {
        role_is(&server.hub, 0, ReplicaRole::Serving)
    })
    .await;
    let second = Replica::start(&cloud, 1, &server.endpoint(), &t.token);
    let provider = registered(&server.hub, &t.store, 2).await;
    assert!(role_is(&server.hub, 1, ReplicaRole::Standby));
    let rows = server.hub.replicas();
    assert_eq!(rows[0].role, ReplicaRole::Serving, "serving listed first");

    let pool = create_pool(&t, &provider, "web", 3).await;
    let reconciler = reconciler(
        &t.store,
        Backends::single(Arc::new(server.hub.clone())),
        &clock,
    );
    // Quotes go through, then the deploys hang at the serving replica.
    drive(
        &reconciler,
        &t.store,
        &pool.id,
        3,
        all_in(NodeState::Deploying),
    )
    .await;
    cloud.set_deploy_delay(Duration::from_millis(300));
    reconciler.pass().await.unwrap();
    eventually("deploys reach the serving replica", HUB_WAIT, || async {
        server.hub.in_flight() == 3
    })
    .await;
    first.kill();
    eventually("standby promoted", HUB_WAIT, || async {
        role_is(&server.hub, 1, ReplicaRole::Serving)
    })
    .await;
    reconciler.settle().await.unwrap();

    let nodes = t.store.list_nodes_by_pool(&pool.id, false).await.unwrap();
    assert!(
        nodes.iter().all(|n| n.status.state == NodeState::Running),
        "{nodes:#?}"
    );
    for node in &nodes {
        let id = node.id.clone();
        assert_eq!(
            cloud.instance_count(&id),
            1,
            "exactly one instance for {}",
            node.id
        );
    }
    assert_eq!(cloud.creates(), 3, "nothing created twice");
    assert_eq!(
        second.provider.roles(),
        vec![ReplicaRole::Standby, ReplicaRole::Serving]
    );
    assert_eq!(server.hub.replicas().len(), 1);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hub_zone_restart_loses_no_node_and_repeats_no_create() {
    let dir = tempfile::tempdir().unwrap();
    let t = tenant(&dir).await;
    let clock = ManualClock::new(START);
    let server = HubServer::start(&t.store, &clock, None).await;
    let address = server.address;
    let cloud = FakeCloud::new();
    let _replica = Replica::start(&cloud, 0, &server.endpoint(), &t.token);
    let provider = registered(&server.hub, &t.store, 1).await;
    let pool = create_pool(&t, &provider, "web", 3).await;
    let first = reconciler(
        &t.store,
        Backends::single(Arc::new(server.hub.clone())),
        &clock,
    );
    drive(&first, &t.store, &pool.id, 3, all_in(NodeState::Deploying)).await;
    cloud.set_deploy_delay(Duration::from_millis(300));
    first.pass().await.unwrap();
    eventually("deploys sent", HUB_WAIT, || async {
        server.hub.in_flight() == 3
    })
    .await;

    // The zone goes away with its deploys out: hub, reconciler and store are dropped.
    server.stop().await;
    drop(first);
    t.store.close().await;

    let store = orc_zone::store::Store::open_sqlite_file(&t.path)
        .await
        .unwrap();
    let nodes = store.list_nodes_by_pool(&pool.id, false).await.unwrap();
    assert_eq!(nodes.len(), 3, "no node lost");
    assert!(nodes.iter().all(|n| n.status.state == NodeState::Deploying));
    let server = HubServer::start(&store, &clock, Some(address)).await;
    registered(&server.hub, &store, 1).await;
    let second = reconciler(
        &store,
        Backends::single(Arc::new(server.hub.clone())),
        &clock,
    );
    assert_eq!(
        second.recover().await.unwrap(),
        3,
        "leases of in-flight deploys released"
    );
    let nodes = drive(&second, &store, &pool.id, 5, all_in(NodeState::Running)).await;
    for node in &nodes {
        let id = node.id.clone();
        assert_eq!(cloud.instance_count(&id), 1, "one instance for {}", node.id);
    }
    assert_eq!(cloud.creates(), 3, "the restart repeated no create");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hub_refuses_streams_without_valid_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let t = tenant(&dir).await;
    let clock = ManualClock::new(START);
    let server = HubServer::start(&t.store, &clock, None).await;
    let (_tx, rx) = tokio::sync::mpsc::channel(1);
    let outbound = orc_provider_sdk::transport::ProviderStream::new(rx);
    use orc_provider_sdk::transport::{ConnectError, Connector};
    let bad = auth_connector(&server.endpoint(), "orc_not-a-token", "acme/web");
    match bad.connect(outbound).await {
        Err(ConnectError::Refused(status)) => {
            assert_eq!(status.code(), tonic::Code::Unauthenticated);
            assert!(!status.message().contains("orc_not"), "token not echoed");
        }
        Err(other) => panic!("expected a refusal, got {other}"),
        Ok(_) => panic!("a bad token was accepted"),
    }
    let (_tx, rx) = tokio::sync::mpsc::channel(1);
    let outbound = orc_provider_sdk::transport::ProviderStream::new(rx);
    let other_project = auth_connector(&server.endpoint(), &t.token, "acme/other");
    match other_project.connect(outbound).await {
        Err(ConnectError::Refused(status)) => {
            assert_eq!(status.code(), tonic::Code::PermissionDenied)
        }
        Err(other) => panic!("expected a refusal, got {other}"),
        Ok(_) => panic!("a project the user is not in was accepted"),
    }
    assert!(server.hub.replicas().is_empty());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hub_background_reconcilers_bring_a_pool_up_and_shut_down() {
    let dir = tempfile::tempdir().unwrap();
    let t = tenant(&dir).await;
    let clock = ManualClock::new(START);
    let server = HubServer::start(&t.store, &clock, None).await;
    let cloud = FakeCloud::new();
    let _replica = Replica::start(&cloud, 0, &server.endpoint(), &t.token);
    let provider = registered(&server.hub, &t.store, 1).await;
    let handle = orc_zone::reconcile::Reconcilers::spawn(
        t.store.clone(),
        Backends::single(Arc::new(server.hub.clone())),
        Arc::new(clock.clone()),
        orc_zone::reconcile::ReconcileOptions {
            poll_interval: Duration::from_millis(20),
            ..Default::default()
        },
    );
    let pool = create_pool(&t, &provider, "web", 2).await;
    handle.wake();
    eventually("both nodes run", Duration::from_secs(5), || async {
        let nodes = t.store.list_nodes_by_pool(&pool.id, false).await.unwrap();
        nodes.iter().all(|n| n.status.state == NodeState::Running)
    })
    .await;
    let nodes = t.store.list_nodes_by_pool(&pool.id, false).await.unwrap();
    assert!(
        nodes.iter().all(|n| n.status.state == NodeState::Running),
        "{nodes:#?}"
    );
    assert_eq!(cloud.creates(), 2);
    handle.shutdown().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hub_silent_serving_stream_is_dropped_and_the_standby_promoted() {
    use orc_provider_sdk::transport::Connector;
    use tokio_stream::StreamExt;

    let dir = tempfile::tempdir().unwrap();
    let t = tenant(&dir).await;
    let clock = ManualClock::new(START);
    let options = orc_zone::hub::HubOptions {
        keepalive_timeout: Duration::from_millis(300),
        clock: Arc::new(clock.clone()),
        ..Default::default()
    };
    let hub = orc_zone::hub::Hub::new(t.store.clone(), options);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let serving = hub.clone();
    let server = tokio::spawn(async move {
        let _ = serving.serve(listener, std::future::pending()).await;
    });

    // A replica that says hello and then never speaks again.
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let hello = orc_proto::ProviderMessage {
        request_id: orc_proto::RequestId::UNSOLICITED,
        body: orc_proto::ProviderBody::Hello(orc_proto::Hello {
            provider: orc_proto::ProviderName::new("fake").unwrap(),
            resource_uri: orc_proto::ResourceUri::new("urn:orc:fake:test").unwrap(),
            replica: orc_proto::Replica {
                host: "mute".into(),
                pid: 1,
                slot: 7,
            },
            version: "0".into(),
            protocol_version: orc_proto::PROTOCOL_VERSION,
        }),
    };
    tx.send(hello.into()).await.unwrap();
    let mute = auth_connector(&endpoint, &t.token, "acme/web");
    let mut inbound = mute
        .connect(orc_provider_sdk::transport::ProviderStream::new(rx))
        .await
        .expect("stream accepted");
    eventually("mute replica serves", HUB_WAIT, || async {
        role_is(&hub, 7, ReplicaRole::Serving)
    })
    .await;
    let cloud = FakeCloud::new();
    let _standby = Replica::start(&cloud, 1, &endpoint, &t.token);
    eventually("standby attached", HUB_WAIT, || async {
        role_is(&hub, 1, ReplicaRole::Standby)
    })
    .await;

    eventually("standby promoted", HUB_WAIT, || async {
        role_is(&hub, 1, ReplicaRole::Serving)
    })
    .await;
    assert!(!role_is(&hub, 7, ReplicaRole::Serving));
    // The mute replica's stream was ended by the zone after its welcome.
    let mut messages = 0;
    while let Some(Ok(_)) = inbound.next().await {
        messages += 1;
    }
    assert_eq!(messages, 1, "only the welcome was sent to the mute replica");
    drop(tx);
    hub.shutdown();
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hub_inventory_from_the_serving_replica_marks_vanished_nodes_lost() {
    let dir = tempfile::tempdir().unwrap();
    let t = tenant(&dir).await;
    let clock = ManualClock::new(START);
    let server = HubServer::start(&t.store, &clock, None).await;
    let cloud = FakeCloud::new();
    let replica = Replica::start_with_inventory(
        &cloud,
        0,
        &server.endpoint(),
        &t.token,
        Duration::from_millis(50),
    );
    let provider = registered(&server.hub, &t.store, 1).await;
    let pool = create_pool(&t, &provider, "web", 2).await;
    let reconciler = reconciler(
        &t.store,
        Backends::single(Arc::new(server.hub.clone())),
        &clock,
    );
    let nodes = drive(
        &reconciler,
        &t.store,
        &pool.id,
        5,
        all_in(NodeState::Running),
    )
    .await;

    // One instance disappears behind the zone's back; reports after the grace period show it.
    let gone = nodes[1].id.clone();
    let destroyed = orc_provider_sdk::Provider::destroy(&*replica.provider, gone).await;
    assert_eq!(destroyed, orc_proto::DestroyResult::Destroyed);
    clock.advance(Duration::from_secs(180));
    let states = eventually_some("a node is lost", Duration::from_secs(5), || async {
        let states: Vec<NodeState> = t
            .store
            .list_nodes_by_pool(&pool.id, false)
            .await
            .unwrap()
            .into_iter()
            .map(|n| n.status.state)
            .collect();
        states.contains(&NodeState::Lost).then_some(states)
    })
    .await;
    assert_eq!(states, vec![NodeState::Running, NodeState::Lost]);
    server.stop().await;
}
