//! How long `orc app deploy` takes to reach HEALTHY: an app of one HTTP service with three
//! replicas (busybox `httpd`, a `healthPath`), deployed through the zone's API to a real
//! node whose agent runs in this process, with Debian's containerd and runc.
//!
//! Two figures, each over `ORC_BENCH_DEPLOY_ROUNDS` rounds (default 5), from the deploy's
//! answer to the app's status reading HEALTHY (polled every 20 ms):
//! - `uncached`: an image the node has never pulled (each round pushes one of its own), so
//!   the time holds the node's pull over TLS with its grant, the checks and the unpack;
//! - `cached`: the same image deployed again after the app was removed, so the layers are on
//!   the node and only the containers are made, started and probed.
//!
//! Root only (containers); the node's containerd, containers and cgroups are removed at the
//! end. `sudo cargo bench -p orc-zone --bench deploy`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use orc_agent::AgentOptions;
use orc_runtime::containerd::Containerd;
use orc_testkit::eventually;
use orc_testkit::oci::{Entry, busybox_files, busybox_httpd, write_layout};
use orc_testkit::zone::{TestZone, tenancy_without_provider};
use serde_json::{Value, json};

const WEB: &str = "/api/orgs/acme/projects/web";
/// The containerd namespace the agent's containers live in.
const NAMESPACE: &str = "orc";
const WAIT: Duration = Duration::from_secs(120);

/// The node's containerd and containers, removed on drop.
struct NodeRuntime {
    dir: PathBuf,
}

impl Drop for NodeRuntime {
    fn drop(&mut self) {
        let apps = self.dir.join("state/apps");
        let socket = apps.join("containerd/containerd.sock");
        let _ = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async {
                if let Ok(client) = Containerd::connect(&socket, NAMESPACE).await {
                    for (id, _) in client.containers().await.unwrap_or_default() {
                        let _ = client.stop(&id, Duration::from_millis(200)).await;
                        let _ = client.delete_task(&id).await;
                        let _ = client.delete_container(&id).await;
                    }
                }
            });
        })
        .join();
        if let Ok(pid) = std::fs::read_to_string(apps.join("containerd/containerd.pid")) {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", pid.trim()])
                .status();
        }
        orc_runtime::supervisor::unmount_under(&apps);
        if let Ok(controllers) = std::fs::read_dir("/sys/fs/cgroup") {
            for controller in controllers.flatten() {
                for slot in 0..3 {
                    let _ = std::fs::remove_dir(
                        controller
                            .path()
                            .join("orc")
                            .join(format!("shop-web-{slot}")),
                    );
                }
                let _ = std::fs::remove_dir(controller.path().join("orc"));
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn start_provider(z: &TestZone, token: &str) -> tokio::sync::oneshot::Sender<()> {
    let cloud = orc_provider_sdk::fake::FakeCloud::new();
    let provider = std::sync::Arc::new(orc_provider_sdk::fake::FakeProvider::new(cloud));
    let credentials =
        orc_provider_sdk::ZoneCredentials::new(token, "acme/web").expect("printable credentials");
    let ca = z
        .zone
        .ca_pem()
        .map(|pem| orc_tls::PinnedCa::from_pem(pem, "the bench zone").expect("CA PEM"));
    let connector = orc_provider_sdk::GrpcConnector::new(
        &z.zone.grpc_url(),
        Duration::from_secs(2),
        ca.as_ref(),
    )
    .expect("endpoint")
    .with_credentials(credentials);
    let options = orc_provider_sdk::RunnerOptions {
        keepalive_interval: Duration::from_millis(500),
        inventory_interval: None,
        jitter_seed: Some(1),
        ..orc_provider_sdk::RunnerOptions::default()
    };
    let runner = orc_provider_sdk::ProviderRunner::with_connector(connector, provider, options);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(runner.run_until(async {
        let _ = stopped.await;
    }));
    stop
}

fn app(tag: &str) -> Value {
    json!({ "app": {
        "name": "shop",
        "services": { "web": {
            "image": format!("acme/shop:{tag}"),
            "replicas": 3,
            "resources": { "cpu": "250m", "memory": "64Mi" },
            "http": { "port": 8080, "healthPath": "/healthz" },
        } },
    }})
}

/// Deploys `tag` and returns how long it took to read HEALTHY; removes the app after.
async fn deploy_to_healthy(
    z: &TestZone,
    token: &str,
    tag: &str,
    socket: &std::path::Path,
) -> Duration {
    let started = Instant::now();
    let deployed = z.post(&format!("{WEB}/apps"), token, app(tag)).await;
    assert_eq!(deployed.body["state"], "DEPLOYING", "{}", deployed.body);
    loop {
        let status = z.get(&format!("{WEB}/apps/shop"), token).await;
        match status.body["app"]["state"].as_str() {
            Some("HEALTHY") => break,
            Some("FAILED" | "BLOCKED") => panic!("{}", status.body),
            _ => {}
        }
        assert!(started.elapsed() < WAIT, "{}", status.body);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let took = started.elapsed();
    let removed = z.delete(&format!("{WEB}/apps/shop"), token).await;
    assert_eq!(removed.status.as_u16(), 204);
    eventually("the containers are gone", WAIT, || async {
        match Containerd::connect(socket, NAMESPACE).await {
            Ok(client) => client.containers().await.unwrap_or_default().is_empty(),
            Err(_) => false,
        }
    })
    .await;
    took
}

fn summary(what: &str, mut times: Vec<Duration>) {
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{what:<9} p50 {:>7.0} ms   min {:>7.0} ms   max {:>7.0} ms   ({} rounds)",
        ms(times[times.len() / 2]),
        ms(times[0]),
        ms(times[times.len() - 1]),
        times.len()
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    assert!(
        rustix::process::geteuid().is_root(),
        "the deploy benchmark runs containers: run it as root"
    );
    let rounds: usize = std::env::var("ORC_BENCH_DEPLOY_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let z = TestZone::start_with(|c| {
        c.agents.keepalive_interval = Duration::from_millis(500);
        // The agent runs in this process's namespace: no workload subnet, no bridge on the
        // host.
        c.mesh.workloads = None;
    })
    .await;
    let t = tenancy_without_provider(&z).await;
    let _provider = start_provider(&z, &t.mia);
    eventually("the provider serves", WAIT, || async {
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
            json!({ "name": "db", "provider": "fake", "size": 1,
                "shape": { "cpu": 2, "mem": 4 }, "class": "eu-central", "os": "debian-12" }),
        )
        .await;
    assert_eq!(created.status.as_u16(), 201, "{}", created.body);
    let node_id = orc_testkit::eventually_some("the node runs", WAIT, || async {
        let nodes = z.get(&format!("{WEB}/pools/db/nodes"), &t.vic).await;
        (nodes.body[0]["state"] == "running")
            .then(|| nodes.body[0]["id"].as_str().unwrap().to_string())
    })
    .await;
    let minted = z
        .post(
            &format!("{WEB}/nodes/{node_id}/join-tokens"),
            &t.mia,
            json!({ "ttl_seconds": 600 }),
        )
        .await;
    let node_dir = PathBuf::from(format!("/tmp/orc-bench-node-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&node_dir);
    std::fs::create_dir_all(&node_dir).expect("the node's dir");
    let _runtime = NodeRuntime {
        dir: node_dir.clone(),
    };
    std::fs::write(
        node_dir.join("join-token"),
        minted.body["secret"].as_str().expect("a token"),
    )
    .expect("the token");
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
    eventually("the node is ready", WAIT, || async {
        let nodes = z.get(&format!("{WEB}/pools/db/nodes"), &t.vic).await;
        nodes.body[0]["agent"]["state"] == "ready"
    })
    .await;
    let socket = node_dir.join("state/apps/containerd/containerd.sock");

    let images = tempfile::tempdir().expect("a dir");
    let mut uncached = Vec::new();
    let mut cached = Vec::new();
    let mut size = 0;
    for round in 0..rounds {
        // An image of its own each round: nothing of it is on the node.
        let mut files = busybox_files("shop\n");
        files.push(Entry::File(
            "round".into(),
            format!("{round} {}", std::process::id()).into_bytes(),
            0o644,
        ));
        let layout = write_layout(
            &images.path().join(format!("r{round}")),
            "1",
            &[files],
            &busybox_httpd(8080),
        );
        size = walk_size(&layout.dir);
        let tag = format!("r{round}");
        z.push_layout(&t.olivia, &layout, "acme/shop", &tag).await;
        uncached.push(deploy_to_healthy(&z, &t.mia, &tag, &socket).await);
        cached.push(deploy_to_healthy(&z, &t.mia, &tag, &socket).await);
    }
    println!(
        "deploy to HEALTHY: 3 replicas of busybox httpd ({:.1} MB image), one node",
        size as f64 / 1e6
    );
    summary("uncached", uncached);
    summary("cached", cached);

    let _ = stop.send(());
    let _ = agent.await;
}

fn walk_size(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir.join("blobs/sha256"))
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}
