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

/// Joins `node` and attaches with `facts`.
async fn attach(z: &TestZone, t_mia: &str, node: &str, facts: agent_pb::Facts) -> Stream {
    let minted = z
        .post(&format!("{WEB}/nodes/{node}/join-tokens"), t_mia, json!({}))
        .await;
    assert_eq!(minted.status, StatusCode::CREATED, "{}", minted.body);
    let key = orc_tls::NodeIdentity::generate().unwrap();
    let secret = minted.body["secret"].as_str().unwrap();
    let joined = join_as(z, secret, node, &key).await.unwrap();
    let mut stream = Stream::attach_with(z, &joined.certificate_chain_pem, &key, Some(facts)).await;
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

    let mut a = attach(&z, &t.mia, &first, facts(1)).await;
    let alone = config(&mut a).await;
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
    assert_eq!(b_peers, [(1, vec![format!("{a_ip}/32")])]);
    let with_b = config(&mut a).await;
    assert_eq!(with_b.generation, alone.generation + 1);
    assert_eq!(mesh(&with_b).1, [(2, vec![format!("{b_ip}/32")])]);

    // The second node ends: the first loses its peer, and the address is quarantined.
    let shrunk = z
        .post(
            &format!("{WEB}/pools/db/resize"),
            &t.mia,
            json!({ "size": 1 }),
        )
        .await;
    assert_eq!(shrunk.status, StatusCode::OK, "{}", shrunk.body);
    let without_b = config(&mut a).await;
    assert_eq!(without_b.generation, with_b.generation + 1);
    assert!(mesh(&without_b).1.is_empty());
    let store = z.zone.store();
    eventually("the second node leaves the mesh", API_WAIT, || async {
        let members = store.mesh_members().await.unwrap();
        members.len() == 1 && members[0].id == first
    })
    .await;
    let agent: Value =
        z.get(&format!("{WEB}/pools/db/nodes"), &t.vic).await.body[0]["agent"].clone();
    assert_eq!(agent["state"], "ready", "{agent}");

    drop((a, b));
    let _ = stop_provider.send(());
    z.zone.shutdown().await;
}
