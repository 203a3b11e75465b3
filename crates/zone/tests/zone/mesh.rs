//! The mesh through a whole zone: joined agents of one project get each other as WireGuard
//! peers at their mesh addresses, a change reaches the agents it concerns as a new config
//! generation, and a node that ends leaves its peers' configs and gives its address back.

use orc_proto::agent_pb::{self, agent_message, zone_message};
use orc_testkit::eventually;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::agents::{Running, Stream, WEB, join_as, running_node};
use crate::api_support::{API_WAIT, TestZone};

/// The facts of an agent with WireGuard key `key` (one byte repeated).
fn facts(key: u8) -> agent_pb::Facts {
    agent_pb::Facts {
        hostname: format!("node-{key}"),
        wireguard_public_key: orc_mesh::PublicKey([key; 32]).to_string(),
        wireguard: "userspace".into(),
        ..Default::default()
    }
}

/// Joins `node` and attaches with `facts`, as an agent that knows only whole configs.
async fn attach(z: &TestZone, t_mia: &str, node: &str, facts: agent_pb::Facts) -> Stream {
    attach_as(z, t_mia, node, facts, false).await
}

/// Joins `node` and attaches with `facts`, as an agent that applies mesh changes or not.
async fn attach_as(
    z: &TestZone,
    t_mia: &str,
    node: &str,
    facts: agent_pb::Facts,
    applies_changes: bool,
) -> Stream {
    let minted = z
        .post(&format!("{WEB}/nodes/{node}/join-tokens"), t_mia, json!({}))
        .await;
    assert_eq!(minted.status, StatusCode::CREATED, "{}", minted.body);
    let key = orc_tls::NodeIdentity::generate().unwrap();
    let secret = minted.body["secret"].as_str().unwrap();
    let joined = join_as(z, secret, node, &key).await.unwrap();
    let chain = &joined.certificate_chain_pem;
    let mut stream = Stream::attach_as(z, chain, &key, Some(facts), applies_changes).await;
    assert!(matches!(
        stream.next().await,
        zone_message::Body::Welcome(_)
    ));
    stream
}

/// The next config, acknowledged as applied.
async fn config(stream: &mut Stream) -> agent_pb::Config {
    let zone_message::Body::Config(config) = stream.next().await else {
        panic!("a config");
    };
    let applied = agent_pb::Applied {
        generation: config.generation,
        error: String::new(),
    };
    stream.send(agent_message::Body::Applied(applied)).await;
    config
}

/// The config an agent that applies changes holds after `config`, whole (for the checks
/// written for whole configs); `held` is what it held before. A stream's first config is
/// whole, every later one is the changes to the one before, naming its generation.
fn follow(
    held: &mut Option<(u64, orc_mesh::MeshConfig)>,
    config: &agent_pb::Config,
) -> agent_pb::Config {
    let mesh = match (held.as_ref(), &config.mesh_changes) {
        (None, None) => {
            orc_mesh::MeshConfig::try_from(config.mesh.as_ref().expect("a whole mesh first"))
                .unwrap()
        }
        (Some((base, old)), Some(changes)) => {
            assert!(config.mesh.is_none(), "changes come alone: {config:?}");
            assert_eq!(changes.base_generation, *base);
            orc_mesh::MeshChanges::try_from(changes)
                .unwrap()
                .apply(old)
                .unwrap()
        }
        _ => panic!("a whole config first and changes after it: {config:?}"),
    };
    *held = Some((config.generation, mesh.clone()));
    agent_pb::Config {
        mesh: Some(agent_pb::Mesh::from(&mesh)),
        mesh_changes: None,
        ..config.clone()
    }
}

/// How many peers `config`'s changes set and remove.
fn changed_peers(config: &agent_pb::Config) -> (usize, usize) {
    let changes = config.mesh_changes.as_ref().expect("changes");
    changes.interfaces.iter().fold((0, 0), |(set, removed), i| {
        (set + i.peers_set.len(), removed + i.peers_removed.len())
    })
}

/// `(address, peers as (key byte, allowed ips))` of a config's project mesh.
fn mesh(config: &agent_pb::Config) -> (String, Vec<(u8, Vec<String>)>) {
    let mesh = config.mesh.as_ref().expect("a mesh");
    let interface = &mesh.interfaces[0];
    assert_eq!(interface.name, "orc-mesh");
    assert_eq!(interface.listen_port, 51820);
    let peers = interface
        .peers
        .iter()
        .map(|p| (p.public_key[0], p.allowed_ips.clone()))
        .collect();
    (interface.address.clone(), peers)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joined_agents_of_a_project_become_each_others_peers_and_part_again() {
    let z = TestZone::start().await;
    let Running {
        t,
        cloud: _,
        stop_provider,
        node_id: first,
    } = running_node(&z).await;

    // The first node's agent applies changes; the second's knows only whole configs.
    let mut a = attach_as(&z, &t.mia, &first, facts(1), true).await;
    let mut held = None;
    let alone = follow(&mut held, &config(&mut a).await);
    let (a_address, peers) = mesh(&alone);
    assert!(a_address.starts_with("10.88.0."), "{a_address}");
    assert!(a_address.ends_with("/24"), "{a_address}");
    assert!(peers.is_empty(), "no other member yet: {peers:?}");

    // A second node of the project joins: both get the other as their only peer.
    let grown = z
        .post(
            &format!("{WEB}/pools/db/resize"),
            &t.mia,
            json!({ "size": 2 }),
        )
        .await;
    assert_eq!(grown.status, StatusCode::OK, "{}", grown.body);
    let second = orc_testkit::eventually_some("the second node runs", API_WAIT, || async {
        let nodes = z.get(&format!("{WEB}/pools/db/nodes"), &t.vic).await.body;
        nodes
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["slot"] == 1 && n["state"] == "running")
            .map(|n| n["id"].as_str().unwrap().to_string())
    })
    .await;
    let mut b = attach(&z, &t.mia, &second, facts(2)).await;
    let (b_address, b_peers) = mesh(&config(&mut b).await);
    assert_ne!(a_address, b_address);
    let a_ip = a_address.split('/').next().unwrap();
    let b_ip = b_address.split('/').next().unwrap();
    // Each peer's mesh address and its workload subnet, the n-th /24 of 10.96.0.0/16 for the
    // n-th address of the project prefix.
    let subnet = |ip: &str| format!("10.96.{}.0/24", ip.rsplit('.').next().unwrap());
    assert_eq!(b_peers, [(1, vec![format!("{a_ip}/32"), subnet(a_ip)])]);
    let changes = config(&mut a).await;
    assert_eq!(changed_peers(&changes), (1, 0), "only the new peer travels");
    let names = &changes.mesh_changes.as_ref().unwrap().hosts_set;
    assert_eq!(names.len(), 1, "and only its name: {names:?}");
    // Host names are <node>.<project>.<org>.internal.
    assert_eq!(names[0].name, format!("{second}.web.acme.internal"));
    let with_b = follow(&mut held, &changes);
    assert_eq!(with_b.generation, alone.generation + 1);
    assert_eq!(
        mesh(&with_b).1,
        [(2, vec![format!("{b_ip}/32"), subnet(b_ip)])]
    );

    // The second node ends: the first loses its peer, and the address is quarantined.
    let shrunk = z
        .post(
            &format!("{WEB}/pools/db/resize"),
            &t.mia,
            json!({ "size": 1 }),
        )
        .await;
    assert_eq!(shrunk.status, StatusCode::OK, "{}", shrunk.body);
    let changes = config(&mut a).await;
    assert_eq!(changed_peers(&changes), (0, 1));
    let without_b = follow(&mut held, &changes);
    assert_eq!(without_b.generation, with_b.generation + 1);
    assert!(mesh(&without_b).1.is_empty());
    let store = z.zone.store();
    eventually("the second node leaves the mesh", API_WAIT, || async {
        let members = store.mesh_members().await.unwrap();
        members.len() == 1 && members[0].id == first
    })
    .await;
    // Back in step once its acknowledgement is written.
    eventually("the first node is ready again", API_WAIT, || async {
        let nodes = z.get(&format!("{WEB}/pools/db/nodes"), &t.vic).await.body;
        nodes[0]["agent"]["state"] == "ready"
    })
    .await;

    drop((a, b));
    let _ = stop_provider.send(());
    z.zone.shutdown().await;
}

/// A mesh status report of the project mesh: one peer per `(key byte, handshake)`.
fn report(generation: u64, peers: &[(u8, u64)]) -> agent_message::Body {
    agent_message::Body::MeshStatus(agent_pb::MeshStatus {
        applied_generation: generation,
        interfaces: vec![agent_pb::InterfaceStatus {
            name: "orc-mesh".into(),
            peers: peers
                .iter()
                .map(|(key, handshake)| agent_pb::PeerStatus {
                    public_key: vec![*key; 32],
                    last_handshake: *handshake,
                    rx_bytes: 1000,
                    tx_bytes: 2000,
                })
                .collect(),
        }],
    })
}

fn member<'a>(mesh: &'a Value, kind: &str) -> &'a Value {
    mesh["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["kind"] == kind)
        .unwrap_or_else(|| panic!("a {kind} in {mesh}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workstation_joins_the_mesh_its_nodes_see_it_and_the_status_says_so() {
    let z = TestZone::start().await;
    let Running {
        t,
        cloud: _,
        stop_provider,
        node_id,
    } = running_node(&z).await;
    let mut a = attach(&z, &t.mia, &node_id, facts(1)).await;
    let first = config(&mut a).await;
    let (a_address, _) = mesh(&first);

    // Before any report: the node is in step, with no peers and nothing reported.
    let status =
        eventually_some_status(&z, &t.vic, |m| member(m, "node")["state"] == "in step").await;
    let node = member(&status, "node");
    assert_eq!(node["address"], a_address.split('/').next().unwrap());
    assert_eq!(node["pool"], "db");
    assert_eq!(node["peers"], 0);
    assert_eq!(node["peers_up"], Value::Null);
    assert_eq!(status["prefix"], "10.88.0.0/24");

    // Who may connect, and what is refused.
    let url = format!("{WEB}/mesh/workstations");
    let laptop_key = orc_mesh::PublicKey([9; 32]).to_string();
    let by_viewer = z
        .post(
            &url,
            &t.vic,
            json!({ "name": "laptop", "public_key": laptop_key }),
        )
        .await;
    assert_eq!(
        by_viewer.status,
        StatusCode::FORBIDDEN,
        "{}",
        by_viewer.body
    );
    let bad_key = z
        .post(
            &url,
            &t.mia,
            json!({ "name": "laptop", "public_key": "not-a-key" }),
        )
        .await;
    assert_eq!(bad_key.status, StatusCode::BAD_REQUEST, "{}", bad_key.body);
    assert_eq!(
        bad_key.body["error"]["field"], "public_key",
        "{}",
        bad_key.body
    );
    let bad_name = z
        .post(
            &url,
            &t.mia,
            json!({ "name": "Laptop", "public_key": laptop_key }),
        )
        .await;
    assert_eq!(bad_name.body["error"]["field"], "name", "{}", bad_name.body);

    // A member connects a workstation: its config has the node as its peer.
    let connected = z
        .post(
            &url,
            &t.mia,
            json!({ "name": "laptop", "public_key": laptop_key }),
        )
        .await;
    assert_eq!(connected.status, StatusCode::CREATED, "{}", connected.body);
    let ws = &connected.body;
    let ws_ip = ws["address"].as_str().unwrap().to_string();
    assert_eq!(ws["interface_address"], format!("{ws_ip}/24"));
    assert_ne!(ws_ip, a_address.split('/').next().unwrap());
    let peers = ws["peers"].as_array().unwrap();
    assert_eq!(peers.len(), 1, "{ws}");
    assert_eq!(
        peers[0]["public_key"],
        orc_mesh::PublicKey([1; 32]).to_string()
    );
    // The node's mesh address, and its workload subnet, which follows from it (the n-th
    // address of the project prefix has the n-th /24 of 10.96.0.0/16).
    let a_ip = a_address.split('/').next().unwrap();
    let host = a_ip.rsplit('.').next().unwrap();
    assert_eq!(
        peers[0]["allowed_ips"],
        json!([format!("{a_ip}/32"), format!("10.96.{host}.0/24")])
    );
    let again = z
        .post(
            &url,
            &t.mia,
            json!({ "name": "laptop", "public_key": orc_mesh::PublicKey([8; 32]).to_string() }),
        )
        .await;
    assert_eq!(again.status, StatusCode::CONFLICT, "{}", again.body);
    assert!(
        again.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("disconnect it first"),
        "{}",
        again.body
    );

    // The node gets the workstation as a peer that dials in.
    let with_ws = config(&mut a).await;
    assert_eq!(mesh(&with_ws).1, [(9, vec![format!("{ws_ip}/32")])]);
    let ws_peer = &with_ws.mesh.as_ref().unwrap().interfaces[0].peers[0];
    assert!(
        ws_peer.endpoint.is_empty(),
        "a workstation dials in: {ws_peer:?}"
    );

    // The node reports a fresh handshake with it: both sides count as up.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    a.send(report(with_ws.generation, &[(9, now)])).await;
    let status = eventually_some_status(&z, &t.vic, |m| {
        member(m, "workstation")["state"] == "connected"
    })
    .await;
    let node = member(&status, "node");
    assert_eq!(
        (node["peers"].clone(), node["peers_up"].clone()),
        (json!(1), json!(1))
    );
    assert_eq!(
        (node["rx_bytes"].clone(), node["tx_bytes"].clone()),
        (json!(1000), json!(2000))
    );
    let ws_status = member(&status, "workstation");
    assert_eq!(ws_status["name"], "laptop");
    assert_eq!(
        (ws_status["peers"].clone(), ws_status["peers_up"].clone()),
        (json!(1), json!(1))
    );

    // An old handshake does not count.
    a.send(report(with_ws.generation, &[(9, now - 600)])).await;
    eventually_some_status(&z, &t.vic, |m| {
        member(m, "node")["peers_up"] == 0 && member(m, "workstation")["state"] == "idle"
    })
    .await;

    // Disconnecting takes it off the node's peers; a second time it is not found.
    let listed = z.get(&url, &t.vic).await;
    assert_eq!(listed.body.as_array().unwrap().len(), 1, "{}", listed.body);
    let gone = z.delete(&format!("{url}/laptop"), &t.mia).await;
    assert_eq!(gone.status, StatusCode::OK, "{}", gone.body);
    assert!(mesh(&config(&mut a).await).1.is_empty());
    let twice = z.delete(&format!("{url}/laptop"), &t.mia).await;
    assert_eq!(twice.status, StatusCode::NOT_FOUND, "{}", twice.body);
    let events = z
        .get(&format!("{WEB}/events"), &t.vic)
        .await
        .body
        .to_string();
    assert!(events.contains("connected workstation laptop"), "{events}");
    assert!(
        events.contains("disconnected workstation laptop"),
        "{events}"
    );
    assert_eq!(
        events.matches("\"node.ready\"").count(),
        1,
        "applying a changed mesh is no new readiness: {events}"
    );

    drop(a);
    let _ = stop_provider.send(());
    z.zone.shutdown().await;
}

/// The project's mesh status once `ready` holds of it.
async fn eventually_some_status(
    z: &TestZone,
    token: &str,
    ready: impl Fn(&Value) -> bool,
) -> Value {
    orc_testkit::eventually_some("the mesh status", API_WAIT, || async {
        let status = z.get(&format!("{WEB}/mesh"), token).await;
        assert_eq!(status.status, StatusCode::OK, "{}", status.body);
        ready(&status.body).then_some(status.body)
    })
    .await
}
