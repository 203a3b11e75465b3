//! An app deployed to a real node: an image built from Debian's static busybox is pushed to
//! the zone's registry, a real agent joins a running node, the zone assigns the app's
//! replicas to it, the agent pulls the image with the grant the assignment carries, runs it
//! through containerd and runc, and reports it: the app becomes HEALTHY. Removing the app
//! stops its containers.
//!
//! Privileged: root, containerd, runc and busybox-static (CI runs as root and installs
//! them); it fails, not skips, without them. The node's containerd, its containers and
//! their cgroups are removed at the end, also when the test fails.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use orc_agent::AgentOptions;
use orc_runtime::containerd::{Containerd, TaskStatus};
use orc_testkit::eventually;
use orc_testkit::oci::{busybox_files, busybox_httpd, write_layout};
use reqwest::StatusCode;
use serde_json::json;

use crate::agents::{WEB, running_node};
use crate::api_support::{API_WAIT, TestZone};

/// The node's containerd and containers, removed on drop.
struct NodeRuntime {
    apps: PathBuf,
}

impl Drop for NodeRuntime {
    fn drop(&mut self) {
        let socket = self.apps.join("containerd/containerd.sock");
        let pid_file = self.apps.join("containerd/containerd.pid");
        let _ = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async {
                if let Ok(client) = Containerd::connect(&socket, orc_agent_namespace()).await {
                    for (id, _) in client.containers().await.unwrap_or_default() {
                        let _ = client.stop(&id, Duration::from_millis(200)).await;
                        let _ = client.delete_task(&id).await;
                        let _ = client.delete_container(&id).await;
                    }
                }
            });
        })
        .join();
        if let Ok(pid) = std::fs::read_to_string(pid_file) {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", pid.trim()])
                .status();
        }
        orc_runtime::supervisor::unmount_under(&self.apps);
        if let Ok(controllers) = std::fs::read_dir("/sys/fs/cgroup") {
            for controller in controllers.flatten() {
                for id in ["shop-web-0", "shop-web-1", "shop-ticker-0"] {
                    let _ = std::fs::remove_dir(controller.path().join("orc").join(id));
                }
                // The agents' parent cgroup, once empty.
                let _ = std::fs::remove_dir(controller.path().join("orc"));
            }
        }
    }
}

fn orc_agent_namespace() -> &'static str {
    "orc"
}

fn require_tools() {
    assert!(
        rustix::process::geteuid().is_root(),
        "running apps on a node needs root (CI runs this test as root)"
    );
    for tool in ["containerd", "containerd-shim-runc-v2", "runc"] {
        let found = std::env::var_os("PATH")
            .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(tool).is_file()));
        assert!(found, "{tool} is missing: apt-get install containerd runc");
    }
}

async fn running_containers(socket: &Path) -> Vec<String> {
    let Ok(client) = Containerd::connect(socket, orc_agent_namespace()).await else {
        return Vec::new();
    };
    let mut running = Vec::new();
    for (id, _) in client.containers().await.unwrap_or_default() {
        if let Ok(Some((_, TaskStatus::Running))) = client.task(&id).await {
            running.push(id);
        }
    }
    running.sort();
    running
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_runs_on_a_joined_node_and_becomes_healthy() {
    require_tools();
    let z = TestZone::start_with(|c| {
        c.agents.keepalive_interval = Duration::from_millis(500);
        // The agent runs in this process's network namespace, the host's: its replicas get
        // no workload subnet, so no bridge or route is made on the host (the netns tests
        // run nodes in namespaces of their own and give replicas their addresses).
        c.mesh.workloads = None;
    })
    .await;
    let running = running_node(&z).await;
    let t = &running.t;
    let node_id = running.node_id.clone();

    let dir = tempfile::tempdir().expect("a temporary dir");
    let layout = write_layout(
        &dir.path().join("layout"),
        "1",
        &[busybox_files("shop\n")],
        &busybox_httpd(8080),
    );
    z.push_layout(&t.olivia, &layout, "acme/shop", "1").await;
    // The worker's image (of its own, so nothing of it is on the node) comes from another
    // registry, with the login the app gives.
    let other = crate::other_registry::OtherRegistry::start().await;
    let worker_layout = write_layout(
        &dir.path().join("worker-layout"),
        "1",
        &[busybox_files("ticker\n")],
        &busybox_httpd(8080),
    );
    assert_ne!(worker_layout.manifest_digest, layout.manifest_digest);
    other
        .push(
            &worker_layout.dir,
            &worker_layout.manifest_digest,
            "team/shop",
            "1",
        )
        .await;
    let set = z
        .put(
            &format!("{WEB}/secrets/team-registry"),
            &t.mia,
            json!({ "value": other.password }),
        )
        .await;
    assert_eq!(set.status, StatusCode::OK, "{}", set.body);

    let minted = z
        .post(
            &format!("{WEB}/nodes/{node_id}/join-tokens"),
            &t.mia,
            json!({ "ttl_seconds": 600 }),
        )
        .await;
    assert_eq!(minted.status, StatusCode::CREATED, "{}", minted.body);
    // Short: the node's containerd socket lives under the state dir.
    let node_dir = PathBuf::from(format!("/tmp/orc-node-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&node_dir);
    std::fs::create_dir_all(&node_dir).expect("the node's dir");
    let _runtime = NodeRuntime {
        apps: node_dir.join("state/apps"),
    };
    std::fs::write(
        node_dir.join("join-token"),
        minted.body["secret"].as_str().unwrap(),
    )
    .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let options = AgentOptions {
        endpoint: Some(z.zone.grpc_url()),
        node_id: Some(node_id.clone()),
        token_file: node_dir.join("join-token"),
        state_dir: node_dir.join("state"),
        product_uuid_file: node_dir.join("product_uuid"),
        connect_timeout: Duration::from_secs(2),
        max_backoff: Duration::from_millis(300),
        mesh: false,
        ..AgentOptions::default()
    };
    let agent = tokio::spawn(orc_agent::run(options, async {
        let _ = stopped.await;
    }));
    eventually("the node is ready", API_WAIT, || async {
        let nodes = z.get(&format!("{WEB}/pools/db/nodes"), &t.vic).await;
        nodes.body[0]["agent"]["state"] == "ready"
    })
    .await;

    let app = json!({ "app": {
        "name": "shop",
        "services": { "web": {
            "image": "acme/shop:1",
            "replicas": 2,
            "resources": { "cpu": "250m", "memory": "64Mi" },
            "http": { "port": 8080, "healthPath": "/healthz" },
        } },
        "registries": { other.host.clone(): {
            "username": other.username, "passwordSecret": "team-registry",
        } },
        "workers": { "ticker": {
            "image": format!("{}/team/shop:1", other.host),
            "command": ["/bin/sh", "-c", "while true; do echo tick; echo tock >&2; sleep 1; done"],
            "resources": { "cpu": "100m", "memory": "32Mi" },
        } },
    }});
    let deployed = z.post(&format!("{WEB}/apps"), &t.mia, app).await;
    assert_eq!(deployed.status, StatusCode::CREATED, "{}", deployed.body);
    assert_eq!(deployed.body["state"], "DEPLOYING", "{}", deployed.body);

    let socket = node_dir.join("state/apps/containerd/containerd.sock");
    eventually("the app is healthy", Duration::from_secs(90), || async {
        let status = z.get(&format!("{WEB}/apps/shop"), &t.vic).await;
        status.body["app"]["state"] == "HEALTHY"
    })
    .await;
    let status = z.get(&format!("{WEB}/apps/shop"), &t.vic).await;
    assert_eq!(status.body["app"]["ready"], 3, "{}", status.body);
    for replica in status.body["replicas"].as_array().expect("replicas") {
        assert_eq!(replica["node"], node_id.as_str(), "{}", status.body);
        assert_eq!(replica["state"], "running", "{}", status.body);
    }
    let mut containers = running_containers(&socket).await;
    containers.sort();
    assert_eq!(containers, ["shop-ticker-0", "shop-web-0", "shop-web-1"]);

    // A command inside a replica: its output, and its exit code.
    let ran = ndjson(
        &z,
        &t.mia,
        reqwest::Method::POST,
        &format!("{WEB}/apps/shop/exec"),
        Some(json!({
            "workload": "web",
            "argv": ["/bin/sh", "-c", "echo out; echo err >&2; hostname; exit 3"],
        })),
        1,
    )
    .await;
    assert_eq!(output_of(&ran, "stdout"), "out\nweb\n", "{ran:?}");
    assert_eq!(output_of(&ran, "stderr"), "err\n", "{ran:?}");
    assert_eq!(
        ran.last().unwrap(),
        &json!({ "type": "exit", "code": 3, "error": null })
    );
    let nowhere = z
        .post(
            &format!("{WEB}/apps/shop/exec"),
            &t.mia,
            json!({ "workload": "db", "argv": ["true"] }),
        )
        .await;
    assert_eq!(nowhere.status, StatusCode::BAD_REQUEST, "{}", nowhere.body);
    assert_eq!(nowhere.field(), Some("workload"));
    let denied = z
        .post(
            &format!("{WEB}/apps/shop/exec"),
            &t.vic,
            json!({ "workload": "web", "argv": ["true"] }),
        )
        .await;
    assert_eq!(
        denied.status,
        StatusCode::FORBIDDEN,
        "a viewer runs nothing"
    );

    // The worker's output: its stdout and stderr, named by replica, then its end.
    let logs = ndjson(
        &z,
        &t.vic,
        reqwest::Method::GET,
        &format!("{WEB}/apps/shop/logs?workload=ticker&tail=0"),
        None,
        1,
    )
    .await;
    assert!(output_of(&logs, "stdout").starts_with("tick\n"), "{logs:?}");
    assert!(output_of(&logs, "stderr").starts_with("tock\n"), "{logs:?}");
    assert!(logs.iter().all(|l| l["replica"] == "ticker[0]"), "{logs:?}");
    assert_eq!(
        logs.last().unwrap(),
        &json!({ "type": "end", "replica": "ticker[0]", "error": null })
    );
    // Followed, it goes on: more ticks arrive than were there.
    let before = output_of(&logs, "stdout").matches("tick").count();
    let followed = ndjson(
        &z,
        &t.vic,
        reqwest::Method::GET,
        &format!("{WEB}/apps/shop/logs?workload=ticker&tail=0&follow=true"),
        None,
        usize::MAX,
    )
    .await;
    assert!(
        output_of(&followed, "stdout").matches("tick").count() > before + 1,
        "{followed:?}"
    );

    // Removed: the node stops its containers.
    let removed = z.delete(&format!("{WEB}/apps/shop"), &t.mia).await;
    assert_eq!(removed.status, StatusCode::NO_CONTENT);
    eventually(
        "the containers are gone",
        Duration::from_secs(60),
        || async { running_containers(&socket).await.is_empty() },
    )
    .await;

    let _ = stop.send(());
    let _ = agent.await;
    drop(_runtime);
    let _ = std::fs::remove_dir_all(&node_dir);
}

/// The lines of an `application/x-ndjson` answer, read until `ends` lines of type `exit` or
/// `end` arrived, or (for a followed answer, `ends = usize::MAX`) for 4 s.
async fn ndjson(
    z: &TestZone,
    token: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<serde_json::Value>,
    ends: usize,
) -> Vec<serde_json::Value> {
    let mut request = z
        .http
        .request(method, format!("{}{path}", z.zone.url()))
        .bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let mut response = request.send().await.expect("an answer");
    assert_eq!(response.status(), StatusCode::OK);
    let mut lines = Vec::new();
    let mut pending = Vec::new();
    let until = tokio::time::Instant::now() + Duration::from_secs(4);
    loop {
        let chunk = if ends == usize::MAX {
            match tokio::time::timeout_at(until, response.chunk()).await {
                Ok(chunk) => chunk.expect("a chunk"),
                Err(_) => return lines,
            }
        } else {
            response.chunk().await.expect("a chunk")
        };
        let Some(chunk) = chunk else { return lines };
        pending.extend_from_slice(&chunk);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            lines.push(serde_json::from_slice(&line).expect("a JSON line"));
        }
        let done = lines
            .iter()
            .filter(|l| l["type"] == "exit" || l["type"] == "end")
            .count();
        if done >= ends {
            return lines;
        }
    }
}

/// The output of `stream` in `lines`, decoded.
fn output_of(lines: &[serde_json::Value], stream: &str) -> String {
    let mut out = Vec::new();
    for line in lines.iter().filter(|l| l["stream"] == stream) {
        out.extend(
            base64::engine::general_purpose::STANDARD
                .decode(line["data"].as_str().unwrap())
                .unwrap(),
        );
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Joins an agent that runs no apps (placement is the zone's; nothing needs to run).
async fn join_quiet_agent(z: &TestZone, token: &str, node: &str, dir: &Path) -> QuietAgent {
    let minted = z
        .post(
            &format!("{WEB}/nodes/{node}/join-tokens"),
            token,
            json!({ "ttl_seconds": 600 }),
        )
        .await;
    assert_eq!(minted.status, StatusCode::CREATED, "{}", minted.body);
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("join-token"),
        minted.body["secret"].as_str().unwrap(),
    )
    .unwrap();
    let options = AgentOptions {
        endpoint: Some(z.zone.grpc_url()),
        node_id: Some(node.to_string()),
        token_file: dir.join("join-token"),
        state_dir: dir.join("state"),
        product_uuid_file: dir.join("product_uuid"),
        connect_timeout: Duration::from_secs(2),
        max_backoff: Duration::from_millis(300),
        mesh: false,
        apps: false,
        ..AgentOptions::default()
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(orc_agent::run(options, async {
        let _ = stopped.await;
    }));
    (stop, task)
}

/// A quiet agent: what stops it, and its task.
type QuietAgent = (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), orc_agent::AgentError>>,
);

/// Two running nodes of pool `db` of `acme/web`, on a fake provider, whose agents joined and
/// run no apps (placement is the zone's; nothing needs to run).
pub(crate) struct QuietNodes {
    pub t: orc_testkit::zone::Tenancy,
    pub nodes: Vec<String>,
    agents: Vec<QuietAgent>,
    _provider: tokio::sync::oneshot::Sender<()>,
    _dir: tempfile::TempDir,
}

impl QuietNodes {
    pub(crate) async fn start(z: &TestZone) -> QuietNodes {
        let t = crate::api_support::tenancy_without_provider(z).await;
        let cloud = orc_provider_sdk::fake::FakeCloud::new();
        let provider = crate::api_support::start_replica(z, &t.mia, "acme/web", &cloud);
        eventually("the provider serves", API_WAIT, || async {
            let list = z.get(&format!("{WEB}/providers"), &t.vic).await;
            list.body
                .as_array()
                .is_some_and(|ps| ps.iter().any(|p| p["replicas"][0]["role"] == "serving"))
        })
        .await;
        let created = z
            .post(
                &format!("{WEB}/pools"),
                &t.mia,
                crate::api_support::pool_body("db", 2),
            )
            .await;
        assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
        let nodes = eventually_nodes(z, &t.vic, 2).await;
        let dir = tempfile::tempdir().unwrap();
        let mut agents = Vec::new();
        for node in &nodes {
            agents.push(join_quiet_agent(z, &t.mia, node, &dir.path().join(node)).await);
        }
        eventually("both nodes are ready", API_WAIT, || async {
            let list = z.get(&format!("{WEB}/pools/db/nodes"), &t.vic).await;
            list.body
                .as_array()
                .is_some_and(|ns| ns.iter().filter(|n| n["agent"]["state"] == "ready").count() == 2)
        })
        .await;
        QuietNodes {
            t,
            nodes,
            agents,
            _provider: provider,
            _dir: dir,
        }
    }

    /// Stops the agents.
    pub(crate) async fn stop(self) {
        for (stop, task) in self.agents {
            let _ = stop.send(());
            let _ = task.await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_constrain_placement_cordons_keep_new_replicas_off_and_a_drain_moves_them() {
    let z = TestZone::start_with(|c| {
        c.agents.keepalive_interval = Duration::from_millis(500);
    })
    .await;
    let quiet = QuietNodes::start(&z).await;
    let (t, nodes) = (&quiet.t, quiet.nodes.clone());
    let layout_dir = tempfile::tempdir().unwrap();
    let layout = write_layout(
        &layout_dir.path().join("layout"),
        "1",
        &[vec![orc_testkit::oci::Entry::File(
            "hello".into(),
            b"hi".to_vec(),
            0o644,
        )]],
        &orc_testkit::oci::RunConfig::default(),
    );
    z.push_layout(&t.olivia, &layout, "acme/shop", "1").await;
    let (front, back) = (&nodes[0], &nodes[1]);

    // A label the zone reserves is refused; a tenant's label is kept.
    let reserved = z
        .put(
            &format!("{WEB}/nodes/{front}/labels/orc.site"),
            &t.mia,
            json!({ "value": "x" }),
        )
        .await;
    assert_eq!(reserved.status, StatusCode::BAD_REQUEST);
    assert_eq!(reserved.field(), Some("name"));
    let labelled = z
        .put(
            &format!("{WEB}/nodes/{front}/labels/tier"),
            &t.mia,
            json!({ "value": "front" }),
        )
        .await;
    assert_eq!(labelled.status, StatusCode::OK, "{}", labelled.body);
    assert_eq!(labelled.body["labels"]["tier"], "front");
    assert_eq!(labelled.body["zone_labels"]["orc.pool"], "db");
    let denied = z
        .put(
            &format!("{WEB}/nodes/{front}/labels/tier"),
            &t.vic,
            json!({ "value": "x" }),
        )
        .await;
    assert_eq!(denied.status, StatusCode::FORBIDDEN);

    let app = |constraints: serde_json::Value, replicas: u32| {
        json!({ "app": {
            "name": "shop",
            "services": { "web": {
                "image": "acme/shop:1",
                "replicas": replicas,
                "constraints": constraints,
                "tcp": { "port": 8080 },
            } },
        }})
    };
    let deployed = z
        .post(
            &format!("{WEB}/apps"),
            &t.mia,
            app(json!({ "tier": "front" }), 2),
        )
        .await;
    assert_eq!(deployed.body["state"], "DEPLOYING", "{}", deployed.body);
    let placed = |body: &serde_json::Value| -> Vec<String> {
        body["replicas"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["node"].as_str().unwrap_or("-").to_string())
            .collect()
    };
    let placed_on = |want: Vec<String>, what: &'static str| {
        let z = &z;
        let vic = t.vic.clone();
        async move {
            eventually(what, API_WAIT, || {
                let want = want.clone();
                let vic = vic.clone();
                async move {
                    let status = z.get(&format!("{WEB}/apps/shop"), &vic).await;
                    let mut now = placed(&status.body);
                    now.sort();
                    let mut want = want;
                    want.sort();
                    now == want
                }
            })
            .await;
        }
    };
    placed_on(
        vec![front.clone(), front.clone()],
        "only the labelled node is eligible",
    )
    .await;

    // A drain cordons the node and moves what runs there; with no other node labelled, the
    // replacements wait for one, and the app says why.
    let drained = z
        .post(&format!("{WEB}/nodes/{front}/drain"), &t.mia, json!({}))
        .await;
    assert_eq!(drained.status, StatusCode::OK, "{}", drained.body);
    assert_eq!(drained.body["cordoned"], true);
    assert_eq!(drained.body["draining"], true);
    assert_eq!(
        drained.body["moving"],
        json!(["shop/web[0]", "shop/web[1]"]),
        "{}",
        drained.body
    );
    placed_on(vec!["-".into(), "-".into()], "the replicas wait for a node").await;
    let status = z.get(&format!("{WEB}/apps/shop"), &t.vic).await;
    assert!(
        status.body["app"]["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("web: ")),
        "{}",
        status.body
    );
    // Labelled too, the other node takes them.
    z.put(
        &format!("{WEB}/nodes/{back}/labels/tier"),
        &t.mia,
        json!({ "value": "front" }),
    )
    .await;
    placed_on(
        vec![back.clone(), back.clone()],
        "the other node takes them",
    )
    .await;

    // A cordoned node takes nothing new: a new revision keeps the two that run (the same
    // definition, only more of it) and places the third on the other node.
    let uncordoned = z
        .post(&format!("{WEB}/nodes/{front}/uncordon"), &t.mia, json!({}))
        .await;
    assert_eq!(uncordoned.body["cordoned"], false);
    assert_eq!(uncordoned.body["draining"], false);
    z.post(&format!("{WEB}/nodes/{back}/cordon"), &t.mia, json!({}))
        .await;
    let bigger = z
        .post(
            &format!("{WEB}/apps"),
            &t.mia,
            app(json!({ "tier": "front" }), 3),
        )
        .await;
    assert_eq!(bigger.body["number"], 2, "{}", bigger.body);
    placed_on(
        vec![back.clone(), back.clone(), front.clone()],
        "the two on the cordoned node stay, the third goes to the other",
    )
    .await;
    let status = z.get(&format!("{WEB}/apps/shop"), &t.vic).await;
    let revisions: Vec<u64> = status.body["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["revision"].as_u64().unwrap())
        .collect();
    assert_eq!(
        revisions,
        [2, 2, 2],
        "taken over, not restarted: {}",
        status.body
    );

    let events = z.get(&format!("{WEB}/events?limit=100"), &t.vic).await;
    let kinds: Vec<&str> = events
        .body
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .collect();
    for kind in [
        "node.labelled",
        "node.drained",
        "node.cordoned",
        "node.uncordoned",
    ] {
        assert!(kinds.contains(&kind), "{kind} in {kinds:?}");
    }
    quiet.stop().await;
}

async fn eventually_nodes(z: &TestZone, token: &str, count: usize) -> Vec<String> {
    eventually("the nodes run", API_WAIT, || async {
        let list = z.get(&format!("{WEB}/pools/db/nodes"), token).await;
        list.body
            .as_array()
            .is_some_and(|ns| ns.iter().filter(|n| n["state"] == "running").count() == count)
    })
    .await;
    let list = z.get(&format!("{WEB}/pools/db/nodes"), token).await;
    list.body
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap().to_string())
        .collect()
}
