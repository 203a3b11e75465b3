//! Rolling updates through the zone's rollout controller, on two joined nodes whose agents
//! run no containers: a stand-in for the nodes reports each replica the zone places as
//! ready, unless its image is the one marked bad, and records what it saw at every look.
//! So the controller's steps, budgets, deadline and automatic rollback are checked against
//! the real zone, store and API, without containers (the privileged tests run those).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use orc_testkit::eventually;
use orc_testkit::oci::{Entry, RunConfig, write_layout};
use orc_zone::model::{Name, NodeId};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::agents::WEB;
use crate::api_support::{API_WAIT, TestZone};
use crate::apps_on_nodes::QuietNodes;

/// What the stand-in saw of the app at one look: replicas that serve (not draining), how
/// many of them were ready, and how many drained.
#[derive(Debug, Clone, Copy)]
struct Look {
    replicas: usize,
    ready: usize,
    draining: usize,
}

/// Reports every placed replica of `app` ready on its node, unless it runs `bad`; keeps
/// each look until stopped.
fn stand_in_nodes(
    z: &TestZone,
    app: &str,
    bad: String,
) -> (
    Arc<Mutex<Vec<Look>>>,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let store = z.zone.store().clone();
    let app: Name = app.parse().unwrap();
    let looks = Arc::new(Mutex::new(Vec::new()));
    let seen = looks.clone();
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let project = store
            .project_by_path(&"acme".parse().unwrap(), &"web".parse().unwrap())
            .await
            .unwrap();
        loop {
            let replicas = store.list_app_replicas(&project.id, &app).await.unwrap();
            for r in &replicas {
                let Some(node) = &r.node_id else { continue };
                let revision = store
                    .app_revision(&project.id, &app, r.revision)
                    .await
                    .unwrap()
                    .unwrap();
                let document: Value = serde_json::from_str(&revision.document).unwrap();
                let ready = document["images"][&r.workload]["digest"] != bad.as_str();
                let node: &NodeId = node;
                store
                    .report_app_replica(
                        node,
                        &project.id,
                        &app,
                        &r.workload,
                        r.slot,
                        r.revision,
                        "running",
                        ready,
                        0,
                        None,
                        orc_zone::model::Timestamp::from_unix_millis(0),
                    )
                    .await
                    .unwrap();
            }
            let serving = || replicas.iter().filter(|r| r.draining_at.is_none());
            seen.lock().unwrap().push(Look {
                replicas: serving().count(),
                ready: serving().filter(|r| r.ready).count(),
                draining: replicas.len() - serving().count(),
            });
            tokio::select! {
                _ = &mut stopped => break,
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
        }
    });
    (looks, stop, task)
}

async fn push_version(z: &TestZone, token: &str, version: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let layout = write_layout(
        &dir.path().join("layout"),
        version,
        &[vec![Entry::File(
            "version".into(),
            version.as_bytes().to_vec(),
            0o644,
        )]],
        &RunConfig::default(),
    );
    z.push_layout(token, &layout, "acme/shop", version).await;
    layout.manifest_digest.clone()
}

fn shop(version: &str, deadline: &str) -> Value {
    json!({ "app": {
        "name": "shop",
        "services": { "web": {
            "image": format!("acme/shop:{version}"),
            "replicas": 3,
            "tcp": { "port": 8080 },
        } },
        "deploy": { "maxSurge": 1, "maxUnavailable": 0, "deadline": deadline, "autoRollback": true },
    }})
}

async fn revision_state(z: &TestZone, token: &str, number: u64) -> Option<Value> {
    let history = z.get(&format!("{WEB}/apps/shop/revisions"), token).await;
    history
        .body
        .as_array()?
        .iter()
        .find(|r| r["number"] == number)
        .cloned()
}

async fn wait_for_state(z: &TestZone, token: &str, number: u64, state: &str) -> Value {
    eventually(
        &format!("revision {number} is {state}"),
        API_WAIT * 2,
        || async {
            revision_state(z, token, number)
                .await
                .is_some_and(|r| r["state"] == state)
        },
    )
    .await;
    revision_state(z, token, number).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_update_keeps_its_budget_and_a_failed_one_rolls_back_by_itself() {
    let z = TestZone::start_with(|c| {
        c.agents.keepalive_interval = Duration::from_millis(500);
        c.replica_drain = Duration::from_millis(600);
    })
    .await;
    let quiet = QuietNodes::start(&z).await;
    let t = &quiet.t;
    let v1 = push_version(&z, &t.olivia, "1").await;
    let v2 = push_version(&z, &t.olivia, "2").await;
    let bad = push_version(&z, &t.olivia, "3").await;
    assert_ne!(v1, v2);
    let (looks, stop, task) = stand_in_nodes(&z, "shop", bad.clone());

    // The first revision starts every replica at once and turns healthy.
    let first = z
        .post(&format!("{WEB}/apps"), &t.mia, shop("1", "10m"))
        .await;
    assert_eq!(first.body["state"], "DEPLOYING", "{}", first.body);
    let healthy = wait_for_state(&z, &t.vic, 1, "HEALTHY").await;
    assert!(healthy["reason"].is_null(), "{healthy}");

    // The second rolls one replica at a time: never more than 4, never fewer than 3 ready.
    looks.lock().unwrap().clear();
    let second = z
        .post(&format!("{WEB}/apps"), &t.mia, shop("2", "10m"))
        .await;
    assert_eq!(second.body["number"], 2, "{}", second.body);
    wait_for_state(&z, &t.vic, 2, "HEALTHY").await;
    let seen = looks.lock().unwrap().clone();
    assert!(
        seen.iter().any(|l| l.replicas == 4),
        "a surge replica was seen: {seen:?}"
    );
    assert!(
        seen.iter().any(|l| l.draining > 0),
        "old replicas drained before they went: {seen:?}"
    );
    for look in &seen {
        assert!(look.replicas <= 4, "over the surge: {seen:?}");
        assert!(look.ready >= 3, "below the replicas: {seen:?}");
    }
    // The drained ones go once their drain is over.
    eventually("the old replicas are gone", API_WAIT, || async {
        let status = z.get(&format!("{WEB}/apps/shop"), &t.vic).await;
        status.body["replicas"].as_array().map(Vec::len) == Some(3)
    })
    .await;
    let status = z.get(&format!("{WEB}/apps/shop"), &t.vic).await;
    let replicas = status.body["replicas"].as_array().unwrap();
    assert_eq!(replicas.len(), 3, "{}", status.body);
    assert!(
        replicas
            .iter()
            .all(|r| r["revision"] == 2 && r["ready"] == true),
        "{}",
        status.body
    );
    assert_eq!(status.body["images"][0]["digest"], v2.as_str());

    // The third never becomes ready: it fails at its deadline, the second comes back as a
    // new revision, and the second's replicas served throughout.
    looks.lock().unwrap().clear();
    let third = z
        .post(&format!("{WEB}/apps"), &t.mia, shop("3", "3s"))
        .await;
    assert_eq!(third.body["state"], "DEPLOYING", "{}", third.body);
    let failed = wait_for_state(&z, &t.vic, 3, "FAILED").await;
    let reason = failed["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("deadline (3s)") && reason.contains("web 0 of 3 ready"),
        "{failed}"
    );
    let rollback = wait_for_state(&z, &t.vic, 4, "HEALTHY").await;
    assert_eq!(rollback["origin"], "auto-rollback:2", "{rollback}");
    assert_eq!(rollback["digest"], second.body["digest"]);
    let status = z.get(&format!("{WEB}/apps/shop"), &t.vic).await;
    let replicas = status.body["replicas"].as_array().unwrap();
    assert_eq!(
        replicas.len(),
        3,
        "the bad surge replica is gone: {}",
        status.body
    );
    assert!(
        replicas.iter().all(|r| r["revision"] == 4),
        "{}",
        status.body
    );
    let seen = looks.lock().unwrap().clone();
    assert!(
        seen.iter().all(|l| l.ready >= 3),
        "the old revision served throughout: {seen:?}"
    );
    let events = z.get(&format!("{WEB}/events?limit=100"), &t.vic).await;
    let kinds: Vec<&str> = events
        .body
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .collect();
    for kind in ["app.healthy", "app.failed", "app.rolled_back"] {
        assert!(kinds.contains(&kind), "{kind} in {kinds:?}");
    }

    // A revision naming a secret the project does not hold is blocked, and says which; it
    // rolls out once the secret is set.
    let vault = json!({ "app": {
        "name": "vault",
        "workers": { "keeper": { "image": "acme/shop:1", "secretEnv": { "KEY": "vault-key" } } },
    }});
    let plan = z
        .post(&format!("{WEB}/apps/plan"), &t.vic, vault.clone())
        .await;
    assert_eq!(
        plan.body["blocked"][0]["code"], "missing_secret",
        "{}",
        plan.body
    );
    let blocked = z.post(&format!("{WEB}/apps"), &t.mia, vault).await;
    assert_eq!(blocked.body["state"], "BLOCKED", "{}", blocked.body);
    assert!(
        blocked.body["reason"]
            .as_str()
            .is_some_and(|r| r.contains("keeper: missing_secret: vault-key")),
        "{}",
        blocked.body
    );
    let vault_state = || async {
        let status = z.get(&format!("{WEB}/apps/vault"), &t.vic).await;
        status.body["app"]["state"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(vault_state().await, "BLOCKED");
    let set = z
        .put(
            &format!("{WEB}/secrets/vault-key"),
            &t.mia,
            json!({ "value": "v-Secret-1" }),
        )
        .await;
    assert_eq!(set.status, StatusCode::OK, "{}", set.body);
    eventually("the blocked revision rolls out", API_WAIT, || async {
        vault_state().await == "DEPLOYING"
    })
    .await;

    // Removed and made again at once under the same name (its revisions numbered from 1
    // again), the app rolls out what it is now, not what it was.
    let removed = z.delete(&format!("{WEB}/apps/vault"), &t.mia).await;
    assert_eq!(removed.status, StatusCode::NO_CONTENT);
    let again = json!({ "app": {
        "name": "vault",
        "workers": { "guard": { "image": "acme/shop:1", "replicas": 2 } },
    }});
    let made = z.post(&format!("{WEB}/apps"), &t.mia, again).await;
    assert_eq!(made.body["number"], 1, "{}", made.body);
    eventually("the new app's replicas are placed", API_WAIT, || async {
        let status = z.get(&format!("{WEB}/apps/vault"), &t.vic).await;
        status.body["replicas"].as_array().is_some_and(|rs| {
            rs.len() == 2
                && rs
                    .iter()
                    .all(|r| r["workload"] == "guard" && r["node"].is_string())
        })
    })
    .await;

    let _ = stop.send(());
    task.await.unwrap();
    quiet.stop().await;
}
