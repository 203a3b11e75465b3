//! Ingress on the zone's side: the first node of a project to join accepts public ingress
//! by itself, a member moves it from node to node (a viewer cannot), and what an app opens
//! to the world (a domain, the catch-all, a public port, a node port) belongs to the app
//! that took it first: another app asking for it is blocked, naming the first, until the
//! first lets it go.

use orc_testkit::eventually;
use orc_testkit::oci::{Entry, RunConfig, write_layout};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::agents::WEB;
use crate::api_support::{API_WAIT, TestZone};
use crate::apps_on_nodes::QuietNodes;

async fn ingress_nodes(z: &TestZone, token: &str) -> Vec<String> {
    let list = z.get(&format!("{WEB}/pools/db/nodes"), token).await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.body);
    list.body
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["ingress"] == true)
        .map(|n| n["id"].as_str().unwrap().to_string())
        .collect()
}

async fn push_image(z: &TestZone, token: &str) {
    let dir = tempfile::tempdir().unwrap();
    let layout = write_layout(
        &dir.path().join("layout"),
        "1",
        &[vec![Entry::File(
            "index.html".into(),
            b"hi".to_vec(),
            0o644,
        )]],
        &RunConfig::default(),
    );
    z.push_layout(token, &layout, "acme/site", "1").await;
}

fn app(name: &str, domain: &str) -> Value {
    json!({ "app": {
        "name": name,
        "services": {
            "web": {
                "image": "acme/site:1",
                "http": { "port": 8080, "domains": [domain], "public": true },
            },
            "game": {
                "image": "acme/site:1",
                "tcp": { "port": 7777, "publicPort": 7777, "nodePort": 7778 },
            },
        },
        "deploy": { "maxSurge": 0, "maxUnavailable": 1 },
    }})
}

async fn newest(z: &TestZone, token: &str, app: &str) -> Value {
    let history = z.get(&format!("{WEB}/apps/{app}/revisions"), token).await;
    assert_eq!(history.status, StatusCode::OK, "{}", history.body);
    history.body.as_array().unwrap().last().cloned().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_node_takes_ingress_a_member_moves_it_and_what_an_app_opens_is_its_own() {
    let z = TestZone::start().await;
    let quiet = QuietNodes::start(&z).await;
    let t = &quiet.t;

    // Exactly one node, the first to join, accepts ingress; both nodes joined.
    let first = ingress_nodes(&z, &t.vic).await;
    assert_eq!(
        first.len(),
        1,
        "one node takes ingress by itself: {first:?}"
    );
    let first = first[0].clone();
    let other = quiet.nodes.iter().find(|n| **n != first).unwrap().clone();
    let events = z.get(&format!("{WEB}/events"), &t.mia).await;
    assert!(
        events
            .body
            .to_string()
            .contains("the first node of its project to join"),
        "{}",
        events.body
    );

    // A viewer cannot move it; a member can, and the placement view says so.
    let refused = z
        .post(
            &format!("{WEB}/nodes/{other}/ingress/enable"),
            &t.vic,
            json!({}),
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    let enabled = z
        .post(
            &format!("{WEB}/nodes/{other}/ingress/enable"),
            &t.mia,
            json!({}),
        )
        .await;
    assert_eq!(enabled.status, StatusCode::OK, "{}", enabled.body);
    assert_eq!(enabled.body["ingress"], true);
    let disabled = z
        .post(
            &format!("{WEB}/nodes/{first}/ingress/disable"),
            &t.mia,
            json!({}),
        )
        .await;
    assert_eq!(disabled.status, StatusCode::OK, "{}", disabled.body);
    assert_eq!(disabled.body["ingress"], false);
    assert_eq!(ingress_nodes(&z, &t.vic).await, vec![other.clone()]);
    let unknown = z
        .post(
            &format!("{WEB}/nodes/n-nosuchnode0/ingress/enable"),
            &t.mia,
            json!({}),
        )
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND, "{}", unknown.body);

    // The first app takes its domain, the catch-all, its public port and its node port.
    push_image(&z, &t.olivia).await;
    let site = z
        .post(
            &format!("{WEB}/apps"),
            &t.mia,
            app("site", "shop.example.com"),
        )
        .await;
    assert_eq!(site.status, StatusCode::CREATED, "{}", site.body);
    assert_ne!(newest(&z, &t.vic, "site").await["state"], "BLOCKED");
    let status = z.get(&format!("{WEB}/apps/site"), &t.vic).await;
    assert_eq!(status.status, StatusCode::OK, "{}", status.body);
    let routes: Vec<(String, String, String)> = status.body["routes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let text = |k: &str| r[k].as_str().unwrap().to_string();
            (text("kind"), text("name"), text("service"))
        })
        .collect();
    let route = |k: &str, n: &str, s: &str| (k.to_string(), n.to_string(), s.to_string());
    assert_eq!(
        routes,
        [
            route("https", "shop.example.com", "web"),
            route("tcp", "7777", "game"),
            route("http", "*", "web"),
        ]
    );
    let addresses = status.body["ingress_addresses"].to_string();
    assert!(
        addresses.contains(&other) && !addresses.contains(&first),
        "only the ingress node is where DNS points: {addresses}"
    );

    // A second app asking for the same is blocked, naming the first, and its plan says why.
    let plan = z
        .post(
            &format!("{WEB}/apps/plan"),
            &t.mia,
            app("blog", "shop.example.com"),
        )
        .await;
    assert_eq!(plan.status, StatusCode::OK, "{}", plan.body);
    let codes: Vec<&str> = plan.body["blocked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["code"].as_str().unwrap())
        .collect();
    for code in [
        "domain_taken",
        "catch_all_taken",
        "public_port_taken",
        "node_port_taken",
    ] {
        assert!(codes.contains(&code), "{code} in {}", plan.body);
    }
    let blog = z
        .post(
            &format!("{WEB}/apps"),
            &t.mia,
            app("blog", "shop.example.com"),
        )
        .await;
    assert_eq!(blog.status, StatusCode::CREATED, "{}", blog.body);
    let revision = newest(&z, &t.vic, "blog").await;
    assert_eq!(revision["state"], "BLOCKED", "{revision}");
    let reason = revision["reason"].as_str().unwrap();
    for words in [
        "web: domain_taken: shop.example.com belongs to app site",
        "web: catch_all_taken: service web of app site is the project's catch-all on port 80",
        "game: public_port_taken: app site opens tcp port 7777 on the ingress nodes",
        "game: node_port_taken: app site publishes tcp port 7778 on its nodes",
    ] {
        assert!(reason.contains(words), "{words:?} in {reason:?}");
    }

    // Once the first app is removed, the second goes ahead by itself.
    let removed = z.delete(&format!("{WEB}/apps/site"), &t.mia).await;
    assert!(removed.status.is_success(), "{}", removed.body);
    eventually("blog is no longer blocked", API_WAIT * 2, || async {
        newest(&z, &t.vic, "blog").await["state"] != "BLOCKED"
    })
    .await;

    quiet.stop().await;
    z.zone.shutdown().await;
}
