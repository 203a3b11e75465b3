//! Pools, nodes, events and usage: success and 4xx naming the field.

use std::collections::{BTreeMap, BTreeSet};

use crate::api_support::{TestZone, pool_body, tenancy};
use orc_zone::apps::AppBinary;
use reqwest::StatusCode;
use serde_json::json;

const POOLS: &str = "/api/orgs/acme/projects/web/pools";

#[tokio::test]
async fn a_new_pool_has_one_pending_node_per_slot() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let created = z.post(POOLS, &t.mia, pool_body("db", 3)).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let pool = &created.body;
    assert_eq!(pool["path"], "acme/web/db");
    assert_eq!(pool["provider"], "acme/web/fake");
    assert_eq!(
        pool["shape"],
        json!({ "cpu": 2, "mem": 4, "arch": "x86_64", "disks": [] })
    );
    assert_eq!(pool["nodes"]["starting"], 3);
    assert_eq!(pool["placement"], json!({}));

    let mut placed = pool_body("direct", 1);
    placed["placement"] = json!({ "plan": "cx23" });
    let placed = z.post(POOLS, &t.mia, placed).await;
    assert_eq!(placed.status, StatusCode::CREATED, "{}", placed.body);
    assert_eq!(placed.body["placement"], json!({ "plan": "cx23" }));

    let nodes = z.get(&format!("{POOLS}/db/nodes"), &t.vic).await;
    assert_eq!(nodes.status, StatusCode::OK);
    let slots: Vec<u64> = nodes
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["slot"].as_u64().unwrap())
        .collect();
    assert_eq!(slots, [0, 1, 2]);
    for node in nodes.body.as_array().unwrap() {
        // No replica of `fake` is connected, so the reconcilers cannot get past quoting.
        let state = node["state"].as_str().unwrap();
        assert!(matches!(state, "pending" | "quoting"), "{node}");
        assert_eq!(node["price"], serde_json::Value::Null);
    }

    z.post(POOLS, &t.mia, pool_body("app", 0)).await;
    let list = z.get(POOLS, &t.vic).await;
    let names: Vec<&str> = list
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["app", "db", "direct"]);
}

#[tokio::test]
async fn resize_and_delete_change_the_nodes() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    z.post(POOLS, &t.mia, pool_body("db", 2)).await;
    let bigger = z
        .post(&format!("{POOLS}/db/resize"), &t.mia, json!({ "size": 4 }))
        .await;
    assert_eq!(bigger.status, StatusCode::OK, "{}", bigger.body);
    assert_eq!(bigger.body["size"], 4);
    assert_eq!(bigger.body["nodes"]["starting"], 4);
    let smaller = z
        .post(&format!("{POOLS}/db/resize"), &t.mia, json!({ "size": 1 }))
        .await;
    assert_eq!(smaller.body["nodes"]["starting"], 1);
    assert_eq!(smaller.body["nodes"]["destroying"], 3);

    let deleted = z.delete(&format!("{POOLS}/db"), &t.mia).await;
    assert_eq!(deleted.status, StatusCode::ACCEPTED, "{}", deleted.body);
    assert_eq!(deleted.body["deleting"], true);
    assert_eq!(deleted.body["size"], 0);
    let resize_deleting = z
        .post(&format!("{POOLS}/db/resize"), &t.mia, json!({ "size": 2 }))
        .await;
    assert_eq!(resize_deleting.status, StatusCode::CONFLICT);
}

#[tokio::test]
async fn bad_pool_requests_name_the_field() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let cases: Vec<(serde_json::Value, &str)> = vec![
        (json!({ "size": 20000 }), "size"),
        (json!({ "size": -1 }), "size"),
        (json!({ "name": "Bad Name" }), "name"),
        (json!({ "provider": "nowhere" }), "provider"),
        (json!({ "shape": { "cpu": 0, "mem": 4 } }), "shape.cpu"),
        (json!({ "shape": { "cpu": "two", "mem": 4 } }), "shape.cpu"),
        (json!({ "shape": { "cpu": 2, "mem": 0 } }), "shape.mem"),
        (
            json!({ "shape": { "cpu": 2, "mem": 4, "arch": "sparc" } }),
            "shape.arch",
        ),
        (
            json!({ "shape": { "cpu": 2, "mem": 4, "disks": [10, 0] } }),
            "shape.disks[1]",
        ),
        (json!({ "shape": { "cpu": 2 } }), "shape.mem"),
        (
            json!({ "shape": { "cpu": 2, "mem": 4, "gpu": 1 } }),
            "shape.gpu",
        ),
        (json!({ "class": "" }), "class"),
        (json!({ "os": " " }), "os"),
        (json!({ "params": { "a": "b" } }), "params"),
        (json!({ "app": "not a package" }), "app"),
        (
            json!({ "app": "sys/app:1", "params": { "Bad-Name": "x" } }),
            "params.Bad-Name",
        ),
        (
            json!({ "endpoints": [{ "name": "web", "protocol": "udp", "port": 80 }] }),
            "endpoints[0].protocol",
        ),
        (json!({ "public": "yes" }), "public"),
        (json!({ "provider": "core" }), "app"),
        (json!({ "placement": { "Plan": "cx23" } }), "placement.Plan"),
        (json!({ "placement": { "plan": "" } }), "placement.plan"),
        (
            json!({ "placement": { "plan": "cx 23" } }),
            "placement.plan",
        ),
        (json!({ "placement": { "plan": 23 } }), "placement.plan"),
        (
            json!({ "ssh_keys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl", "-----BEGIN OPENSSH PRIVATE KEY-----"] }),
            "ssh_keys[1]",
        ),
        (json!({ "ssh_keys": ["ssh-ed25519 AAAA"] }), "ssh_keys[0]"),
        (json!({ "ssh_keys": vec!["x"; 21] }), "ssh_keys"),
        (json!({ "ssh_keys": "ssh-ed25519 AAAA" }), "ssh_keys"),
    ];
    for (patch, field) in cases {
        let mut body = pool_body("db", 1);
        for (k, v) in patch.as_object().unwrap() {
            body[k] = v.clone();
        }
        let a = z.post(POOLS, &t.mia, body.clone()).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{body}: {}", a.body);
        assert_eq!(a.field(), Some(field), "{body}: {}", a.body);
    }
    let mut private = pool_body("db", 1);
    private["ssh_keys"] = json!(["-----BEGIN OPENSSH PRIVATE KEY-----"]);
    let a = z.post(POOLS, &t.mia, private).await;
    assert_eq!(
        a.body["error"]["message"],
        "ssh_keys[0] is not an OpenSSH public key: it is a private key; give the public one \
         (the .pub file)"
    );
    let mut no_size = pool_body("db", 1);
    no_size.as_object_mut().unwrap().remove("size");
    let a = z.post(POOLS, &t.mia, no_size).await;
    assert_eq!(a.field(), Some("size"));

    z.post(POOLS, &t.mia, pool_body("db", 1)).await;
    let dup = z.post(POOLS, &t.mia, pool_body("db", 1)).await;
    assert_eq!(dup.status, StatusCode::CONFLICT);
    assert_eq!(dup.field(), Some("name"));

    let resize = z
        .post(
            &format!("{POOLS}/db/resize"),
            &t.mia,
            json!({ "size": "3" }),
        )
        .await;
    assert_eq!(resize.field(), Some("size"));
    let missing_pool = z.get(&format!("{POOLS}/nope/nodes"), &t.mia).await;
    assert_eq!(missing_pool.status, StatusCode::NOT_FOUND);
    assert_eq!(missing_pool.field(), Some("pool"));
    let bad_query = z
        .get(&format!("{POOLS}/db/nodes?include_ended=maybe"), &t.mia)
        .await;
    assert_eq!(bad_query.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad_query.field(), Some("include_ended"));
    let unknown_query = z.get(&format!("{POOLS}/db/nodes?colour=red"), &t.mia).await;
    assert_eq!(unknown_query.field(), Some("colour"));
}

#[tokio::test]
async fn app_params_are_reconfigured_and_sensitive_values_never_shown() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let mut body = pool_body("svc", 1);
    body["app"] = json!("acme/svc:1");
    body["params"] = json!({ "mode": "a" });
    body["sensitive_params"] = json!({ "api_key": "hunter2-secret" });
    let created = z.post(POOLS, &t.mia, body).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(created.body["app"]["sensitive_params"], json!(["api_key"]));
    assert!(!created.body.to_string().contains("hunter2"));
    assert_eq!(created.body["generation"], 1);

    let changed = z
        .post(
            &format!("{POOLS}/svc/reconfigure"),
            &t.mia,
            json!({ "params": { "mode": "b" }, "generation": 1 }),
        )
        .await;
    assert_eq!(changed.status, StatusCode::OK, "{}", changed.body);
    assert_eq!(changed.body["app"]["params"], json!({ "mode": "b" }));
    assert_eq!(changed.body["app"]["sensitive_params"], json!(["api_key"]));
    assert_eq!(changed.body["generation"], 2);

    let stale = z
        .post(
            &format!("{POOLS}/svc/reconfigure"),
            &t.mia,
            json!({ "params": { "mode": "c" }, "generation": 1 }),
        )
        .await;
    assert_eq!(stale.status, StatusCode::CONFLICT);
    assert_eq!(stale.field(), Some("generation"));

    z.post(POOLS, &t.mia, pool_body("plain", 1)).await;
    let no_app = z
        .post(
            &format!("{POOLS}/plain/reconfigure"),
            &t.mia,
            json!({ "params": { "mode": "b" } }),
        )
        .await;
    assert_eq!(no_app.status, StatusCode::BAD_REQUEST);
    assert_eq!(no_app.field(), Some("params"));
}

#[tokio::test]
async fn a_param_the_app_declares_sensitive_is_refused_as_a_plain_param() {
    let z = TestZone::start_with(|config| {
        config.apps.apps.insert(
            "keyed".to_string(),
            AppBinary {
                path: "/bin/true".into(),
                args: vec![],
                env: BTreeMap::new(),
                sensitive_params: BTreeSet::from(["api_key".to_string()]),
            },
        );
    })
    .await;
    let t = tenancy(&z).await;
    let mut body = pool_body("svc", 1);
    body["app"] = json!("sys/keyed:1");
    body["params"] = json!({ "mode": "a", "api_key": "hunter2-secret" });
    let refused = z.post(POOLS, &t.mia, body.clone()).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
    assert_eq!(refused.field(), Some("params"));
    let message = refused.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("param api_key is sensitive"), "{message}");
    assert!(
        !refused.body.to_string().contains("hunter2"),
        "{}",
        refused.body
    );

    body["params"] = json!({ "mode": "a" });
    body["sensitive_params"] = json!({ "api_key": "hunter2-secret" });
    let created = z.post(POOLS, &t.mia, body).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let reconfigured = z
        .post(
            &format!("{POOLS}/svc/reconfigure"),
            &t.mia,
            json!({ "params": { "api_key": "hunter3-secret" } }),
        )
        .await;
    assert_eq!(reconfigured.status, StatusCode::BAD_REQUEST);
    assert_eq!(reconfigured.field(), Some("params"));
    assert!(!reconfigured.body.to_string().contains("hunter3"));
}

#[tokio::test]
async fn events_and_usage_are_read_per_project() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let events = z.get("/api/orgs/acme/projects/web/events", &t.vic).await;
    assert_eq!(events.status, StatusCode::OK);
    assert_eq!(events.body, json!([]));
    let bad_limit = z
        .get("/api/orgs/acme/projects/web/events?limit=0", &t.vic)
        .await;
    assert_eq!(bad_limit.field(), Some("limit"));
    let bad_after = z
        .get("/api/orgs/acme/projects/web/events?after=n-1", &t.vic)
        .await;
    assert_eq!(bad_after.field(), Some("after"));

    let usage = z
        .get("/api/orgs/acme/projects/web/usage?month=2026-11", &t.vic)
        .await;
    assert_eq!(usage.status, StatusCode::OK, "{}", usage.body);
    assert_eq!(usage.body["month"], "2026-11");
    assert_eq!(usage.body["lines"], json!([]));
    let bad_month = z
        .get("/api/orgs/acme/projects/web/usage?month=2026-13", &t.vic)
        .await;
    assert_eq!(bad_month.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad_month.field(), Some("month"));
    let current = z.get("/api/orgs/acme/projects/web/usage", &t.vic).await;
    assert_eq!(current.status, StatusCode::OK);
    assert_eq!(current.body["month"].as_str().unwrap().len(), 7);
}

#[tokio::test]
async fn quotes_without_provider_connections_are_unavailable() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let body = json!({
        "provider": "fake", "shape": { "cpu": 2, "mem": 4 },
        "class": "eu-central", "os": "debian-12"
    });
    let by_viewer = z
        .post("/api/orgs/acme/projects/web/quote", &t.vic, body.clone())
        .await;
    assert_eq!(by_viewer.status, StatusCode::FORBIDDEN);
    let bad = z
        .post(
            "/api/orgs/acme/projects/web/quote",
            &t.mia,
            json!({ "provider": "fake", "shape": { "cpu": 2, "mem": 4 }, "os": "debian-12" }),
        )
        .await;
    assert_eq!(bad.field(), Some("class"));
    let unavailable = z
        .post("/api/orgs/acme/projects/web/quote", &t.mia, body)
        .await;
    assert_eq!(unavailable.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(unavailable.code(), Some("unavailable"));
    let core = z
        .post(
            "/api/orgs/acme/projects/web/quote",
            &t.mia,
            json!({ "provider": "core", "shape": { "cpu": 1, "mem": 1 },
                    "class": "local", "os": "host" }),
        )
        .await;
    assert_eq!(core.status, StatusCode::BAD_REQUEST);
    assert_eq!(core.field(), Some("provider"));
    let logs = z
        .get(&format!("{POOLS}/none/logs?level=loud"), &t.mia)
        .await;
    assert_eq!(logs.field(), Some("level"));
}

/// `orc logs` of a pool that keeps none, or of a slot it does not have, is an error naming
/// the pool by its path, not an empty answer.
#[tokio::test]
async fn logs_of_a_pool_without_them_or_of_a_missing_slot_are_refused() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let pools = "/api/orgs/acme/projects/web/pools";
    let mut app = pool_body("svc", 2);
    app["app"] = json!("acme/svc:1");
    assert_eq!(z.post(pools, &t.mia, app).await.status, StatusCode::CREATED);
    assert_eq!(
        z.post(pools, &t.mia, pool_body("plain", 1)).await.status,
        StatusCode::CREATED
    );

    let kept = z.get(&format!("{pools}/svc/logs?slot=1"), &t.mia).await;
    assert_eq!(kept.status, StatusCode::OK, "{}", kept.body);

    let missing = z.get(&format!("{pools}/svc/logs?slot=5"), &t.mia).await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST);
    assert_eq!(missing.field(), Some("slot"));
    assert_eq!(
        missing.body["error"]["message"],
        "slot 5 is not a slot of pool acme/web/svc: it has slots 0 to 1"
    );

    let none = z.get(&format!("{pools}/plain/logs"), &t.mia).await;
    assert_eq!(none.status, StatusCode::BAD_REQUEST);
    assert_eq!(none.field(), Some("pool"));
    assert!(
        none.body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("pool acme/web/plain is not an app pool"),
        "{}",
        none.body
    );
}

/// `orc events` shows the newest events (oldest of them first) with their pool's name; the
/// oldest-first reading from an event on stays for `--follow`.
#[tokio::test]
async fn events_read_newest_first_with_pool_names() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    assert_eq!(
        z.post(POOLS, &t.mia, pool_body("web", 0)).await.status,
        StatusCode::CREATED
    );
    let store = z.zone.store();
    let project = store
        .project_by_path(&"acme".parse().unwrap(), &"web".parse().unwrap())
        .await
        .unwrap();
    let pool = store
        .pool_by_path(
            &"acme".parse().unwrap(),
            &"web".parse().unwrap(),
            &"web".parse().unwrap(),
        )
        .await
        .unwrap();
    let scope = orc_zone::model::EventScope {
        project_id: Some(project.id.clone()),
        pool_id: Some(pool.id.clone()),
        ..Default::default()
    };
    let before = z
        .get("/api/orgs/acme/projects/web/events?limit=1000", &t.vic)
        .await;
    let already = before.body.as_array().unwrap().len();
    for i in 0..5 {
        store
            .record_event(
                &scope,
                "test.step",
                &format!("step {i}"),
                orc_zone::model::Timestamp::now(),
            )
            .await
            .unwrap();
    }
    let events = "/api/orgs/acme/projects/web/events";
    let newest = z
        .get(&format!("{events}?limit=2&newest=true"), &t.vic)
        .await;
    assert_eq!(newest.status, StatusCode::OK, "{}", newest.body);
    let words: Vec<&str> = newest
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["words"].as_str().unwrap())
        .collect();
    assert_eq!(words, ["step 3", "step 4"]);
    assert_eq!(newest.body[0]["pool"], "web");

    let oldest = z.get(&format!("{events}?limit=1000"), &t.vic).await;
    assert_eq!(oldest.body.as_array().unwrap().len(), already + 5);
    let first_new = &oldest.body[already]["id"];
    let after = z
        .get(
            &format!("{events}?after={}", first_new.as_str().unwrap()),
            &t.vic,
        )
        .await;
    assert_eq!(after.body.as_array().unwrap().len(), 4);

    let both = z
        .get(
            &format!("{events}?newest=true&after={}", first_new.as_str().unwrap()),
            &t.vic,
        )
        .await;
    assert_eq!(both.status, StatusCode::BAD_REQUEST);
    assert_eq!(both.field(), Some("newest"));
}

/// Errors name objects by their paths, never by internal ids.
#[tokio::test]
async fn errors_name_paths_not_ids() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    assert_eq!(
        z.post(POOLS, &t.mia, pool_body("db", 0)).await.status,
        StatusCode::CREATED
    );
    let again = z.post(POOLS, &t.mia, pool_body("db", 0)).await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    let message = again.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("acme/web"), "{message}");
    assert!(!message.contains("p-0"), "{message}");

    let deleting = z.delete(&format!("{POOLS}/db"), &t.mia).await;
    assert!(deleting.status.is_success(), "{}", deleting.body);
    let resized = z
        .post(&format!("{POOLS}/db/resize"), &t.mia, json!({ "size": 2 }))
        .await;
    if resized.status == StatusCode::CONFLICT {
        let message = resized.body["error"]["message"].as_str().unwrap();
        assert!(message.contains("acme/web/db"), "{message}");
        assert!(!message.contains("pl-0"), "{message}");
    } else {
        // A pool of size 0 may be gone already: then it is simply not found, by name.
        assert_eq!(resized.status, StatusCode::NOT_FOUND, "{}", resized.body);
        let message = resized.body["error"]["message"].as_str().unwrap();
        assert!(!message.contains("pl-0"), "{message}");
    }
}

/// A pool's life is in its events: created, resized (only when the size changes), deleting.
#[tokio::test]
async fn pool_lifecycle_events_are_recorded() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    assert_eq!(
        z.post(POOLS, &t.mia, pool_body("api", 0)).await.status,
        StatusCode::CREATED
    );
    for size in [2, 2, 1] {
        let resized = z
            .post(
                &format!("{POOLS}/api/resize"),
                &t.mia,
                json!({ "size": size }),
            )
            .await;
        assert_eq!(resized.status, StatusCode::OK, "{}", resized.body);
    }
    assert!(
        z.delete(&format!("{POOLS}/api"), &t.mia)
            .await
            .status
            .is_success()
    );
    let events = z
        .get(
            "/api/orgs/acme/projects/web/events?pool=api&limit=1000",
            &t.vic,
        )
        .await;
    let pool_events: Vec<(String, String)> = events
        .body
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"].as_str().unwrap().starts_with("pool."))
        .map(|e| {
            (
                e["kind"].as_str().unwrap().into(),
                e["words"].as_str().unwrap().into(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = [
        (
            "pool.created",
            "created with 0 node(s) on provider acme/web/fake",
        ),
        ("pool.resized", "resized from 0 to 2"),
        ("pool.resized", "resized from 2 to 1"),
        (
            "pool.deleting",
            "deletion asked: its nodes are destroyed, then the pool goes",
        ),
    ]
    .iter()
    .map(|(k, w)| (k.to_string(), w.to_string()))
    .collect();
    assert_eq!(pool_events, expected);
}

#[tokio::test]
async fn a_sensitive_param_typed_anew_replaces_only_itself() {
    let z = TestZone::start().await;
    let t = tenancy(&z).await;
    let mut body = pool_body("svc", 1);
    body["app"] = json!("acme/svc:1");
    body["sensitive_params"] = json!({ "api_key": "first-key", "db_password": "kept-pass" });
    let created = z.post(POOLS, &t.mia, body).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);

    let changed = z
        .post(
            &format!("{POOLS}/svc/reconfigure"),
            &t.mia,
            json!({ "params": {}, "sensitive_params_update": { "api_key": "second-key" } }),
        )
        .await;
    assert_eq!(changed.status, StatusCode::OK, "{}", changed.body);
    assert_eq!(
        changed.body["app"]["sensitive_params"],
        json!(["api_key", "db_password"])
    );
    assert!(!changed.body.to_string().contains("-key"));
    let name = |text: &str| text.parse().unwrap();
    let pool = z
        .zone
        .store()
        .pool_by_path(&name("acme"), &name("web"), &name("svc"))
        .await
        .unwrap();
    let held = pool.spec.app.unwrap().sensitive.0;
    assert_eq!(held["api_key"], "second-key");
    assert_eq!(held["db_password"], "kept-pass");

    let both = z
        .post(
            &format!("{POOLS}/svc/reconfigure"),
            &t.mia,
            json!({
                "params": {},
                "sensitive_params": { "api_key": "x" },
                "sensitive_params_update": { "api_key": "y" }
            }),
        )
        .await;
    assert_eq!(both.status, StatusCode::BAD_REQUEST, "{}", both.body);
    assert_eq!(both.field(), Some("sensitive_params_update"));
}
