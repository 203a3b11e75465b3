//! Agents at scale: N real `orc agent` processes join one zone and stay attached.
//!
//! A zone (TLS, SQLite in a temp dir, production timings) runs in this process with a fake
//! provider; a pool of N nodes runs; each node gets a join token and its own `orc agent`
//! process (the binary this package builds). Printed:
//! - **running → ready**: per node, from spawning its agent to the zone holding it ready
//!   (process start, key, join with its TLS handshake, certificate, attach, config applied):
//!   first for 10 agents started one at a time (a node's own time), then p50, p99 and max
//!   for the rest started at once, and the wall time until all were ready;
//! - **idle cost** over a window with all N attached (keep-alives every 15 s, facts every
//!   60 s): the zone's CPU time and resident memory (this process, before the agents and
//!   with them), and one agent's CPU time and resident memory (the mean over all).
//!
//! `cargo bench -p orc-cli --bench agents` (N = 200; `ORC_BENCH_AGENTS=N`,
//! `ORC_BENCH_IDLE_SECS=S` to change; default 30 s).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use orc_zone::model::AgentState;
use orc_zone::zone::{Zone, ZoneConfig};
use support::{percentile, usage};

mod support;

/// Agents started one at a time, each waited for, before the rest start at once.
const SERIAL: usize = 10;

fn main() {
    let count: usize = std::env::var("ORC_BENCH_AGENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let idle = Duration::from_secs(
        std::env::var("ORC_BENCH_IDLE_SECS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(30),
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run(count, idle));
}

async fn run(count: usize, idle: Duration) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let zone = Zone::start(ZoneConfig::ephemeral(tmp.path().join("zone")))
        .await
        .expect("zone");
    let (pool_id, nodes) = support::running_pool(&zone, count).await;
    let (zone_cpu_0, zone_rss_0) = usage("self");
    let ca = zone.ca().unwrap().fingerprint();
    let new = orc_zone::store::NewJoinToken {
        ca_fingerprint: &ca,
        created_by: "bench",
        ttl: orc_zone_model::JoinTtl::default(),
        product_uuid: None,
    };
    let dirs = tempfile::tempdir().expect("agents dir");
    let spawn = |node: &orc_zone::model::Node, secret: &str| {
        let dir = dirs.path().join(node.id.as_str());
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("join-token"), secret).unwrap();
        std::process::Command::new(env!("CARGO_BIN_EXE_orc"))
            .args([
                "agent",
                "--zone",
                &zone.grpc_url(),
                "--node",
                node.id.as_str(),
            ])
            .arg("--join-token-file")
            .arg(dir.join("join-token"))
            .arg("--state-dir")
            .arg(dir.join("state"))
            .arg("--product-uuid-file")
            .arg(dir.join("product_uuid"))
            .env("ORC_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("orc agent starts")
    };
    let mut children = Vec::new();
    let mut started = BTreeMap::new();
    let mut ready_after = BTreeMap::new();
    // First a few one at a time: a node's own time to ready on an idle zone.
    let serial = SERIAL.min(count);
    for node in &nodes[..serial] {
        let (_, secret) = zone
            .store()
            .create_join_token(&node.id, &new, orc_zone::model::Timestamp::now())
            .await
            .unwrap();
        started.insert(node.id.clone(), Instant::now());
        children.push(spawn(node, secret.expose()));
        let want = ready_after.len() + 1;
        wait_ready(&zone, &pool_id, &started, &mut ready_after, want).await;
    }
    let mut alone: Vec<Duration> = ready_after.values().copied().collect();
    alone.sort();
    if !alone.is_empty() {
        println!(
            "agents/running_to_ready one at a time  n={serial}  p50={:.0} ms  max={:.0} ms",
            percentile(&alone, 0.5).as_secs_f64() * 1e3,
            alone.last().unwrap().as_secs_f64() * 1e3
        );
    }
    // Then the rest at once.
    let all_start = Instant::now();
    for node in &nodes[serial..] {
        let (_, secret) = zone
            .store()
            .create_join_token(&node.id, &new, orc_zone::model::Timestamp::now())
            .await
            .unwrap();
        started.insert(node.id.clone(), Instant::now());
        children.push(spawn(node, secret.expose()));
    }
    wait_ready(&zone, &pool_id, &started, &mut ready_after, count).await;
    let all_ready = all_start.elapsed();
    let mut times: Vec<Duration> = ready_after
        .iter()
        .filter(|(node, _)| !nodes[..serial].iter().any(|n| &n.id == *node))
        .map(|(_, d)| *d)
        .collect();
    times.sort();
    if !times.is_empty() {
        println!(
            "agents/running_to_ready all at once  n={}  p50={:.0} ms  p99={:.0} ms  max={:.0} ms  all ready after {:.2} s",
            times.len(),
            percentile(&times, 0.5).as_secs_f64() * 1e3,
            percentile(&times, 0.99).as_secs_f64() * 1e3,
            times.last().unwrap().as_secs_f64() * 1e3,
            all_ready.as_secs_f64()
        );
    }

    // Idle: everything attached, production keep-alives.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (zone_cpu_1, _) = usage("self");
    let agents_1: Vec<(f64, u64)> = children
        .iter()
        .map(|c| usage(&c.id().to_string()))
        .collect();
    tokio::time::sleep(idle).await;
    let (zone_cpu_2, zone_rss_2) = usage("self");
    let agents_2: Vec<(f64, u64)> = children
        .iter()
        .map(|c| usage(&c.id().to_string()))
        .collect();
    let attached = zone.agents().attached_count();
    let zone_cpu = (zone_cpu_2 - zone_cpu_1) / idle.as_secs_f64() * 100.0;
    let agent_cpu: f64 = agents_1
        .iter()
        .zip(&agents_2)
        .map(|(a, b)| b.0 - a.0)
        .sum::<f64>()
        / count as f64
        / idle.as_secs_f64()
        * 100.0;
    let agent_rss = agents_2.iter().map(|(_, rss)| *rss).sum::<u64>() / count as u64;
    println!(
        "agents/idle  n={count} attached={attached} over {} s: zone CPU {zone_cpu:.2} % of a core, zone RSS {} MiB before the agents and {} MiB with them; per agent CPU {agent_cpu:.3} % of a core, RSS {:.1} MiB",
        idle.as_secs(),
        zone_rss_0 / 1024,
        zone_rss_2 / 1024,
        agent_rss as f64 / 1024.0
    );
    let _ = zone_cpu_0;
    for mut child in children {
        let _ = child.kill();
        let _ = child.wait();
    }
    zone.shutdown().await;
}

/// Waits until `want` agents of the pool are ready, noting when each got there.
async fn wait_ready(
    zone: &Zone,
    pool: &orc_zone::model::PoolId,
    started: &BTreeMap<orc_zone::model::NodeId, Instant>,
    ready_after: &mut BTreeMap<orc_zone::model::NodeId, Duration>,
    want: usize,
) {
    let deadline = Instant::now() + Duration::from_secs(300);
    while ready_after.len() < want {
        for agent in zone.store().node_agents_of_pool(pool).await.unwrap() {
            if agent.state == AgentState::Ready && !ready_after.contains_key(&agent.node_id) {
                ready_after.insert(agent.node_id.clone(), started[&agent.node_id].elapsed());
            }
        }
        assert!(Instant::now() < deadline, "agents did not get ready");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
