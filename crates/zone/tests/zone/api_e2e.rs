//! The API over a whole zone with a provider connected to its hub: a fake provider dials in,
//! registers, answers quotes through the API, and a pool created through the API gets its
//! nodes running, priced with the markup its provider had at admission.

use crate::api_support::{API_WAIT, TestZone, start_replica, tenancy_without_provider};
use orc_provider_sdk::fake::FakeCloud;
use orc_testkit::eventually;
use reqwest::StatusCode;
use serde_json::{Value, json};

const WEB: &str = "/api/orgs/acme/projects/web";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_on_a_connected_provider_gets_running_priced_nodes() {
    let z = TestZone::start().await;
    let t = tenancy_without_provider(&z).await;
    let cloud = FakeCloud::new();
    let stop = start_replica(&z, &t.mia, "acme/web", &cloud);

    eventually(
        "the provider registers with a serving replica and a catalog",
        API_WAIT,
        || async {
            let list = z.get(&format!("{WEB}/providers"), &t.vic).await;
            list.body.as_array().is_some_and(|ps| {
                ps.iter().any(|p| {
                    p["name"] == "acme/web/fake"
                        && p["replicas"][0]["role"] == "serving"
                        && p["catalog"]["classes"][0]["id"] == "eu-central"
                })
            })
        },
    )
    .await;

    let priced = z
        .put(
            &format!("{WEB}/providers/fake/pricing"),
            &t.olivia,
            json!({ "markup": "0.15" }),
        )
        .await;
    assert_eq!(priced.status, StatusCode::OK, "{}", priced.body);

    let quote = z
        .post(
            &format!("{WEB}/quote"),
            &t.mia,
            json!({ "provider": "fake", "shape": { "cpu": 2, "mem": 4 },
                    "class": "eu-central", "os": "debian-12" }),
        )
        .await;
    assert_eq!(quote.status, StatusCode::OK, "{}", quote.body);
    assert_eq!(quote.body["outcome"], "offer");
    assert_eq!(quote.body["markup"], "0.15");
    assert!(quote.body["price"]["amount"].is_string(), "{}", quote.body);
    assert_eq!(cloud.creates(), 0, "a quote creates nothing");

    let unknown_class = z
        .post(
            &format!("{WEB}/pools"),
            &t.mia,
            json!({ "name": "db", "provider": "fake", "size": 2, "shape": { "cpu": 2, "mem": 4 },
                    "class": "mars-north", "os": "debian-12" }),
        )
        .await;
    assert_eq!(unknown_class.status, StatusCode::BAD_REQUEST);
    assert_eq!(unknown_class.field(), Some("class"));

    // A key given twice (with other spacing) is kept once.
    const KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl ann@laptop";
    let spaced = KEY.replace(' ', "  ");
    let created = z
        .post(
            &format!("{WEB}/pools"),
            &t.mia,
            json!({ "name": "db", "provider": "fake", "size": 2, "shape": { "cpu": 2, "mem": 4 },
                    "class": "eu-central", "os": "debian-12", "ssh_keys": [KEY, spaced] }),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(
        created.body["ssh_keys"],
        json!([{ "kind": "ssh-ed25519",
                 "fingerprint": "SHA256:+DiY3wvvV6TuJJhbpZisF/zLDA0zPMSvHdkr4UvCOqU",
                 "comment": "ann@laptop" }])
    );

    eventually("both nodes run", API_WAIT, || async {
        let pool = z.get(&format!("{WEB}/pools/db"), &t.vic).await;
        pool.body["nodes"]["running"] == 2
    })
    .await;
    let nodes = z.get(&format!("{WEB}/pools/db/nodes"), &t.vic).await;
    for node in nodes.body.as_array().unwrap() {
        assert_eq!(node["state"], "running", "{node}");
        assert_eq!(node["markup"], "0.15", "{node}");
        assert!(
            node["site"].as_str().unwrap().starts_with("eu-central-"),
            "{node}"
        );
        assert!(node["price"]["amount"].is_string(), "{node}");
        assert!(
            node.get("placed").is_none(),
            "a tenant never sees where a node went: {node}"
        );
    }
    // A zone operator sees the cloud, location and instance the provider reported.
    let seen = z.get(&format!("{WEB}/pools/db/nodes"), &z.admin).await;
    for node in seen.body.as_array().unwrap() {
        assert_eq!(node["placed"]["cloud"], "fake", "{node}");
        assert_eq!(node["placed"]["location"], node["site"], "{node}");
        assert!(
            node["placed"]["instance"]
                .as_str()
                .is_some_and(|i| !i.is_empty()),
            "{node}"
        );
    }
    assert_eq!(cloud.instances().len(), 2);
    for instance in cloud.instances() {
        assert_eq!(
            instance.ssh_keys,
            [KEY],
            "every deploy carries the pool's keys"
        );
    }

    let deleted = z.delete(&format!("{WEB}/pools/db"), &t.mia).await;
    assert_eq!(deleted.status, StatusCode::ACCEPTED);
    eventually("the pool's instances are destroyed", API_WAIT, || async {
        cloud.instances().is_empty()
    })
    .await;

    // The pool's life reads from its events: created, each node running, deletion asked,
    // each node ended.
    eventually("both nodes end", API_WAIT, || async {
        let events = z
            .get(&format!("{WEB}/events?pool=db&limit=1000"), &t.vic)
            .await;
        let kinds: Vec<&str> = events
            .body
            .as_array()
            .map(|list| list.iter().filter_map(|e| e["kind"].as_str()).collect())
            .unwrap_or_default();
        kinds.iter().filter(|k| **k == "node.ended").count() == 2
    })
    .await;
    let events = z
        .get(&format!("{WEB}/events?pool=db&limit=1000"), &t.vic)
        .await;
    let list: &Vec<Value> = events.body.as_array().expect("events list");
    let kinds: Vec<&str> = list
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .filter(|k| !k.starts_with("node.progress"))
        .collect();
    assert_eq!(
        kinds,
        [
            "pool.created",
            "node.running",
            "node.running",
            "pool.deleting",
            "node.ended",
            "node.ended"
        ],
        "{list:#?}"
    );
    assert_eq!(
        list[0]["words"],
        "created with 2 node(s) on provider acme/web/fake"
    );
    assert_eq!(list[0]["pool"], "db");
    let running = list.iter().find(|e| e["kind"] == "node.running").unwrap();
    assert!(
        running["words"]
            .as_str()
            .unwrap()
            .starts_with("running at site eu-central-"),
        "{running}"
    );

    let _ = stop.send(());
    z.zone.shutdown().await;
}
