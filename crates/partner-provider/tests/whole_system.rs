//! The whole system on one machine: the cloud emulators, a zone, and two `orc-prov-partner`
//! processes dialling it. A pool in eu-central gets quotes through the protocol and lands on
//! the cheapest cloud; SIGKILL of the serving replica promotes the standby, and the pool's
//! pending work completes with no node lost and no instance duplicated in the clouds.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use orc_emu::{ClockMode, EmuConfig, Timings};
use orc_proto::ReplicaRole;
use orc_testkit::EmuControl;
use orc_zone::zone::{Zone, ZoneConfig};
use serde_json::{Value, json};

const PARTNER: &str = env!("CARGO_BIN_EXE_orc-prov-partner");
const POOLS: &str = "/api/orgs/sys/projects/sys/pools";

/// One `orc-prov-partner serve` process, killed when dropped.
struct Replica(Child);

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_replica(slot: u32, zone: &Zone, emu: &orc_emu::RunningEmulators, dir: &Path) -> Replica {
    let token_file = dir.join("zone-token");
    std::fs::write(&token_file, zone.admin_token().expose()).expect("token file");
    let child = Command::new(PARTNER)
        .arg("serve")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("RUST_LOG", "warn")
        .env("ORC_ZONE_ENDPOINT", zone.grpc_url())
        .env(
            "ORC_ZONE_CA_FILE",
            zone.ca_file().expect("the zone speaks TLS"),
        )
        .env("ORC_ZONE_TOKEN_FILE", &token_file)
        .env("ORC_ZONE_PROJECT", "sys/sys")
        .env("ORC_SLOT", slot.to_string())
        .env("ORC_HETZNER_ENDPOINT", emu.hetzner_url().expect("hetzner"))
        .env("ORC_VULTR_ENDPOINT", emu.vultr_url().expect("vultr"))
        .env("ORC_PARAM_PARTNER_ID", "whole-system")
        .env("ORC_PARAM_HETZNER_API_TOKEN", "demo-token")
        .env("ORC_PARAM_HETZNER_OWNER_TAG", "ws-hetzner")
        .env("ORC_PARAM_HETZNER_EXCHANGE_RATE", "1.08")
        .env("ORC_PARAM_VULTR_API_KEY", "demo-token")
        .env("ORC_PARAM_VULTR_OWNER_TAG", "ws-vultr")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("orc-prov-partner starts");
    Replica(child)
}

async fn eventually<T>(what: &str, mut probe: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Hetzner servers and Vultr instances the partner holds in the emulated accounts.
async fn cloud_instances(http: &reqwest::Client, emu: &orc_emu::RunningEmulators) -> usize {
    let hetzner: Value = http
        .get(format!(
            "{}/servers?per_page=50",
            emu.hetzner_url().unwrap()
        ))
        .bearer_auth("demo-token")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let vultr: Value = http
        .get(format!(
            "{}/instances?per_page=500",
            emu.vultr_url().unwrap()
        ))
        .bearer_auth("demo-token")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    hetzner["servers"].as_array().unwrap().len() + vultr["instances"].as_array().unwrap().len()
}

/// Requests both emulators have answered so far.
async fn cloud_requests(emu: &orc_emu::RunningEmulators) -> u64 {
    let mut total = 0;
    for handle in [emu.hetzner.as_ref(), emu.vultr.as_ref()]
        .into_iter()
        .flatten()
    {
        total += EmuControl::new(handle.root_url()).counters().await.total;
    }
    total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_the_serving_replica_loses_and_duplicates_nothing() {
    let mut emu_config = EmuConfig::for_tests();
    emu_config.robot = None;
    emu_config.clock_mode = ClockMode::Auto;
    emu_config.timings = Timings::instant();
    let emu = emu_config.start().await.expect("emulators start");

    let dir = tempfile::tempdir().expect("temp dir");
    let mut config = ZoneConfig::new(dir.path().join("zone"));
    config.http_addr = "127.0.0.1:0".parse().unwrap();
    config.grpc_addr = "127.0.0.1:0".parse().unwrap();
    config.edge = None;
    let zone = Zone::start(config).await.expect("zone starts");
    let api = zone.url();
    let token = zone.admin_token().expose().to_string();
    let ca = reqwest::Certificate::from_pem(zone.ca_pem().expect("TLS").as_bytes()).expect("CA");
    let http = reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(ca)
        .build()
        .expect("HTTP client");

    let mut replicas = vec![
        Some(start_replica(0, &zone, &emu, dir.path())),
        Some(start_replica(1, &zone, &emu, dir.path())),
    ];
    eventually("both replicas to register", async || {
        let rows = zone.hub().replicas();
        (rows.len() == 2).then_some(())
    })
    .await;

    // Quotes travel zone → partner → zone and never reach a cloud.
    let quote = json!({
        "provider": "partner",
        "shape": {"cpu": 2, "mem": 4},
        "class": "eu-central",
        "os": "ubuntu-24.04",
    });
    let first = http
        .post(format!("{api}/api/orgs/sys/projects/sys/quote"))
        .bearer_auth(&token)
        .json(&quote)
        .send()
        .await
        .unwrap();
    assert!(
        first.status().is_success(),
        "{}",
        first.text().await.unwrap()
    );
    // Becoming serving reads the catalogs and takes an inventory; let that settle first.
    let mut before = cloud_requests(&emu).await;
    eventually("the clouds to go quiet", async || {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = cloud_requests(&emu).await;
        let quiet = now == before;
        before = now;
        quiet.then_some(())
    })
    .await;
    for _ in 0..20 {
        let offer: Value = http
            .post(format!("{api}/api/orgs/sys/projects/sys/quote"))
            .bearer_auth(&token)
            .json(&quote)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(offer["site"], "eu-central-a", "{offer}");
    }
    assert_eq!(
        cloud_requests(&emu).await,
        before,
        "a quote sent a cloud request"
    );

    let create = json!({
        "name": "web",
        "provider": "partner",
        "size": 2,
        "shape": {"cpu": 2, "mem": 4},
        "class": "eu-central",
        "os": "ubuntu-24.04",
    });
    let created = http
        .post(format!("{api}{POOLS}"))
        .bearer_auth(&token)
        .json(&create)
        .send()
        .await
        .unwrap();
    assert!(
        created.status().is_success(),
        "{}",
        created.text().await.unwrap()
    );

    let running = |want: usize| {
        let (http, api, token) = (http.clone(), api.clone(), token.clone());
        async move || {
            let nodes: Vec<Value> = http
                .get(format!("{api}{POOLS}/web/nodes"))
                .bearer_auth(&token)
                .send()
                .await
                .ok()?
                .json()
                .await
                .ok()?;
            let up = nodes.iter().filter(|n| n["state"] == "running").count();
            (up == want && nodes.len() == want).then_some(nodes)
        }
    };
    let nodes = eventually("two running nodes", running(2)).await;
    for node in &nodes {
        // Hetzner's cx23 in fsn1 (5.49 EUR net, 7.06 USD gross at 1.08) beats Vultr's 20 USD.
        assert_eq!(node["site"], "eu-central-a", "{node}");
    }
    assert_eq!(cloud_instances(&http, &emu).await, 2);

    let serving = zone
        .hub()
        .replicas()
        .into_iter()
        .find(|r| r.role == ReplicaRole::Serving)
        .expect("a serving replica");
    let index = replicas
        .iter()
        .position(|r| r.as_ref().is_some_and(|r| r.0.id() == serving.pid))
        .expect("the serving replica is one of ours");
    let status = Command::new("kill")
        .args(["-KILL", &serving.pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    replicas[index].take();

    let resize = http
        .post(format!("{api}{POOLS}/web/resize"))
        .bearer_auth(&token)
        .json(&json!({"size": 4}))
        .send()
        .await
        .unwrap();
    assert!(
        resize.status().is_success(),
        "{}",
        resize.text().await.unwrap()
    );

    eventually("the standby to serve", async || {
        let rows = zone.hub().replicas();
        (rows.len() == 1 && rows[0].role == ReplicaRole::Serving && rows[0].pid != serving.pid)
            .then_some(())
    })
    .await;
    let nodes = eventually("four running nodes", running(4)).await;
    let mut ids: Vec<&str> = nodes.iter().map(|n| n["id"].as_str().unwrap()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 4, "no node lost or doubled: {nodes:?}");
    assert_eq!(
        cloud_instances(&http, &emu).await,
        4,
        "no instance duplicated in the clouds"
    );

    drop(replicas);
    zone.shutdown().await;
}
